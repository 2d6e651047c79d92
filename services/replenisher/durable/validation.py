"""Bad input through ingress gets a 4xx with the reason, and changes nothing.

The SDK turns an input it cannot parse into a 500. Handlers here parse their own input:
the serde hands a parse failure to the handler as `BadInput`, and `handler` answers it
with a 400 before the handler body runs. The pydantic annotation still gives Restate
the JSON schema at discovery.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, get_type_hints

from pydantic import BaseModel, ValidationError
from restate.exceptions import TerminalError
from restate.serde import Serde

from replenisher.loop.request import describe

M = TypeVar("M", bound=BaseModel)


class BadInput:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class LenientJson(Serde[Any]):
    """Parses JSON into `model`, or into `BadInput` with a readable reason."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def deserialize(self, buf: bytes) -> Any:
        if not buf:
            return BadInput("a JSON body is required")
        try:
            return self.model.model_validate_json(buf)
        except ValidationError as e:
            return BadInput(describe(e))
        except ValueError as e:
            return BadInput(f"not valid JSON: {e}")

    def serialize(self, obj: Any) -> bytes:
        if isinstance(obj, BaseModel):
            return obj.model_dump_json().encode()
        return json.dumps(obj).encode()


def bad_request(reason: str) -> TerminalError:
    return TerminalError(f"bad request: {reason}", status_code=400)


def validated(register: Callable[..., Any], **options: Any) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
    """`@validated(obj.handler, kind="shared")` in place of `@obj.handler(kind="shared")`.

    For a handler whose input is a pydantic model: bad input is answered with a 400.
    """

    def wrap(fn: Callable[..., Awaitable[Any]]) -> Any:
        params = list(inspect.signature(fn).parameters)
        if len(params) < 2:
            return register(**options)(fn)
        model = get_type_hints(fn)[params[1]]

        @functools.wraps(fn)
        async def checked(ctx: Any, arg: Any) -> Any:
            if isinstance(arg, BadInput):
                raise bad_request(arg.reason)
            return await fn(ctx, arg)

        return register(input_serde=LenientJson(model), **options)(checked)

    return wrap
