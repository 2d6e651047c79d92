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
    """Runs woken per K (percentiles are nearest-rank: a p99 needs 100 or more to mean anything)."""
    wake_samples_by_k: dict[int, int] = {}
    """Fewer for a K so long that the slower peers would take hours to start that many runs."""
    idle_sizes: list[int]
    idle_sizes_by_system: dict[str, list[int]] = {}
    """Smaller sizes for a peer whose fill would take most of the run (see FULL)."""
    idle_wakes: int
    warmup: int = 10

    def samples(self, steps: int) -> int:
        return self.wake_samples_by_k.get(steps, self.wake_samples)

    def idle(self, system: str) -> list[int]:
        return self.idle_sizes_by_system.get(system, self.idle_sizes)


QUICK = Plan(
    name="quick",
    throughput=[(1, 5), (10, 100), (50, 100)],
    wake_steps=[10, 30],
    wake_samples=30,
    idle_sizes=[50, 150],
    idle_wakes=5,
    warmup=5,
)

FULL = Plan(
    name="full",
    throughput=[(1, 200), (10, 200), (50, 250), (200, 400)],
    wake_steps=[10, 30, 100, 500],
    wake_samples=200,
    wake_samples_by_k={500: 30},
    idle_sizes=[100, 1000, 10000],
    # The 10,000 point is for ours (the engine's memory per waiting run) and the asyncio floor.
    # On 2 cores the peers fill about 5.5 waiting runs a second, so their 9,000 more runs would
    # add some 80 minutes to a run that took 103 without them (2026-12-04), more than a working
    # session allows; their memory per waiting run is read from 100 to 1,000.
    idle_sizes_by_system={peer: [100, 1000] for peer in ("temporal", "dbos-postgres", "dbos-sqlite")},
    idle_wakes=20,
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
