"""A candidate with a versioned branch (`replenisher.loop.patches`), for the tests of `patched`.

The real service's app with one patch named and one branch on it, in this process only, as a change
of behaviour that must reach runs in flight would be written: at the end of every wait, the new
branch appends `MARK` to the turn's summary (what the run's state shows); the old branch leaves the
summary exactly as the code without the patch wrote it, so runs journaled there replay. The tests
serve it as a deployment (`tests.upgrade.patched:marked_waits_app()`, with the repository on
PYTHONPATH) beside the plain service.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from replenisher.durable.app import create_app
from replenisher.loop import patches, run
from replenisher.loop.engine import Engine

PATCH = "mark-waits"
MARK = "[waited on the patched code]"


WHAT = f"a wait's summary ends with {MARK}"
Wait = Callable[[Engine, Any, Any], Awaitable[str]]


def marked(original: Wait) -> Wait:
    """The loop's `wait` with the branch: the new side marks the summary, the old one is `original`."""

    async def wait(engine: Engine, tool: Any, state: Any) -> str:
        summary = await original(engine, tool, state)
        return f"{summary} {MARK}" if engine.patched(PATCH) else summary

    return wait


def marked_waits_app() -> Any:
    patches.PATCHES[PATCH] = WHAT
    run.wait = marked(run.wait)  # type: ignore[assignment]
    return create_app()
