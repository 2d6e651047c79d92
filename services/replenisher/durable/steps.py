"""Journaled steps: every call to the outside world runs through here, inside `ctx.run`.

A step is retried with exponential backoff for a bounded number of attempts. An answer
that will not change on retry (`Rejected`) ends the step at once. Either way the failure
comes back to the harness as a `TerminalError`, which it hands to the tool's
`apply_failure`, so the decider sees it and decides.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel
from restate import Context, RunOptions
from restate.exceptions import TerminalError

from replenisher.domain.ports import Rejected
from replenisher.durable.clock import Timed
from replenisher.durable.probes import crash_point, hold_point
from replenisher.loop.patches import Stamp
from replenisher.wiring import settings, wiring

T = TypeVar("T", bound=BaseModel)


def retry_options(type_hint: type[T]) -> RunOptions[T]:
    s = settings()
    return RunOptions(
        type_hint=type_hint,
        max_attempts=s.step_max_attempts,
        initial_retry_interval=s.step_initial_retry,
        retry_interval_factor=2.0,
        max_retry_interval=s.step_max_retry,
    )


async def step(ctx: Context, name: str, result: type[T], action: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run `action(*args)` as a named, journaled step with the standard retry policy."""
    return await ctx.run_typed(name, _attempt(ctx.key(), name, action, *args), retry_options(result))


async def timed_step(
    ctx: Context,
    name: str,
    result: type[T],
    action: Callable[..., Awaitable[T]],
    *args: Any,
    stamp: Stamp | None = None,
) -> Timed[T]:
    """`step`, journaling with the result the wall clock as the step ended (and `stamp`, if given:
    the code that ran it)."""
    attempt, journaled, clock = _attempt(ctx.key(), name, action, *args), timed_model(result), wiring().clock

    async def timed_attempt() -> Timed[T]:
        timed = journaled(value=await attempt(), at=clock())
        return timed.stamped(stamp) if stamp is not None else timed

    return await ctx.run_typed(name, timed_attempt, retry_options(journaled))


@cache
def timed_model(result: type[T]) -> type[Timed[T]]:
    """`Timed[result]`, made once per result type. Pydantic keeps the generic models it makes only
    weakly, so one made per step was built again (its schema, its validator) at nearly every step
    and every replay: 4% of the service's CPU in a sample of the test suite."""
    return Timed[result]  # type: ignore[valid-type]


def _attempt(scope: str, name: str, action: Callable[..., Awaitable[T]], *args: Any) -> Callable[[], Awaitable[T]]:
    async def attempt() -> T:
        crash_point(scope, name, "before")
        await hold_point(scope, name, "before")
        try:
            result = await action(*args)
            crash_point(scope, name, "after")
            await hold_point(scope, name, "after")
            return result
        except Rejected as e:
            raise TerminalError(f"refused by the other side: {e.reason}", status_code=e.status) from e

    return attempt
