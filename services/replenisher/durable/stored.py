"""Reading what Restate keeps for us, refusing for good what this code cannot read.

A record or state written by newer code (a higher `schema_version`) or damaged otherwise
does not parse. Retrying would fail the same way for ever and wedge the SKU, so it is a
terminal error that names the key and the reason.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from restate import ObjectContext, ObjectSharedContext, WorkflowContext, WorkflowSharedContext
from restate.exceptions import TerminalError

from replenisher.durable.validation import describe

M = TypeVar("M", bound=BaseModel)

Context = ObjectContext | ObjectSharedContext | WorkflowContext | WorkflowSharedContext


async def load_stored(ctx: Context, key: str, model: type[M]) -> M | None:
    try:
        return await ctx.get(key, type_hint=model)
    except ValidationError as e:
        raise TerminalError(f"stored {key!r} cannot be read by this code: {describe(e)}", status_code=500) from e
