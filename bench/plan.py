"""How much of each measurement a run does: `quick` (under five minutes, every system) or `full`."""

from __future__ import annotations

from pydantic import BaseModel


class Plan(BaseModel):
    name: str
    throughput: list[tuple[int, int]]
    """(concurrency, replenishments) per level."""
    wake_steps: list[int]
    """K: journaled steps before the approval wait (30 = a full MAX_TURNS run)."""
    wake_samples: int
    idle_sizes: list[int]
    idle_wakes: int
    warmup: int = 10


QUICK = Plan(
    name="quick",
    throughput=[(1, 3), (10, 10), (50, 50)],
    wake_steps=[10, 30, 100],
    wake_samples=3,
    idle_sizes=[50, 150],
    idle_wakes=2,
    warmup=3,
)

FULL = Plan(
    name="full",
    throughput=[(1, 20), (10, 100), (50, 250), (200, 400)],
    wake_steps=[10, 30, 100, 500],
    wake_samples=20,
    idle_sizes=[100, 1000, 10000],
    idle_wakes=5,
)

PLANS = {"quick": QUICK, "full": FULL}

# For working on the bench itself: every code path, in seconds.
SMOKE = Plan(
    name="smoke",
    throughput=[(1, 3), (5, 10)],
    wake_steps=[10, 30],
    wake_samples=2,
    idle_sizes=[20],
    idle_wakes=1,
    warmup=3,
)

PLANS["smoke"] = SMOKE
