"""A worker restart's CPU and each cold run's share of it (`bench.run.restart_cost`): plain
arithmetic, importable without the bench's measuring packages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def cpu_grown(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """CPU a process tree spent between two readings by pid (`bench.measure.cpu_by_process`): each
    process alive at the end, less what it had at the start (a process started in between counts
    whole). A process that ended in between takes what it spent since the start with it: a
    restart's CPU is then a floor, not more."""
    return sum(max(cpu - before.get(pid, 0.0), 0.0) for pid, cpu in after.items())


def recovery_share(restart: Mapping[str, Any], empty: Mapping[str, Any], runs: int) -> dict[str, float]:
    """Each cold run's share of what the restart with runs waiting cost over the one without, by
    process, in ms: what the worker spent recovering them before any was woken."""
    return {
        role: round(max(restart["cpu_s"][role] - empty["cpu_s"].get(role, 0.0), 0.0) * 1000 / max(runs, 1), 3)
        for role in restart["cpu_s"]
    }
