"""One more try for a measurement that a transient error broke, and only one.

A connection reset on a loaded machine says nothing about the system measured; a second
failure of the same measurement does, and fails the system.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class TransientError(RuntimeError):
    """A failure worth one retry: the other side answered 5xx or went away mid-request."""


def _transient() -> tuple[type[BaseException], ...]:
    kinds: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, TransientError)
    try:
        import aiohttp  # the bench extra's; the logic is tested without it
    except ImportError:
        return kinds
    return (*kinds, aiohttp.ClientError)


TRANSIENT = _transient()


async def once_more(
    what: str,
    attempt: Callable[[int], Awaitable[T]],
    retries: list[dict[str, Any]],
    say: Callable[[str], None] = print,
) -> T:
    """`attempt(0)`; after a transient error, `attempt(1)` (fresh names, so nothing collides with
    what the first try left). Every retry is recorded in `retries`; any other error, or a second
    failure, propagates."""
    try:
        return await attempt(0)
    except TRANSIENT as e:
        error = f"{type(e).__name__}: {e}"
        retries.append({"measurement": what, "error": error[:300]})
        say(f"    {what}: transient error ({error[:120]}); measuring it once more")
        return await attempt(1)
