"""Candidates with a planted incompatible change, for the upgrade check's positive controls.

Each factory is the real service's app with one method of the Restate engine changed in this
process only, as a careless edit of the code would change it: the check must report every waiting
run it breaks. Nothing else imports this module; the test serves it as the candidate
(`replenisher upgrade-check --candidate-app tests.upgrade.planted:renamed_step_app()`).
"""

from __future__ import annotations

from typing import Any

from replenisher.durable.app import create_app
from replenisher.durable.restate_engine import RestateEngine

PLANTED_STEP = "planted_step"


def renamed_step_app() -> Any:
    """Every step journaled under a new name: a step renamed."""
    original = RestateEngine.step

    async def step(self: RestateEngine, name: str, effect: Any) -> Any:
        return await original(self, f"{name}_renamed", effect)

    RestateEngine.step = step  # type: ignore[method-assign]
    return create_app()


def step_before_wait_app() -> Any:
    """A new journaled step before every wait for a message: a step added before a wait."""
    original = RestateEngine.receive

    async def receive(self: RestateEngine, *args: Any, **kwargs: Any) -> bytes | None:
        await self.ctx.run_typed(PLANTED_STEP, _nothing)
        return await original(self, *args, **kwargs)

    RestateEngine.receive = receive  # type: ignore[method-assign]
    return create_app()


async def _nothing() -> str:
    return "planted"
