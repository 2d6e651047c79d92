"""What the driver reads off the processes: CPU seconds, memory, disk, and latency percentiles.

CPU is read from the kernel per process tree (psutil), so it counts every thread of a Rust or Go
engine and every backend of PostgreSQL. A window's CPU is the difference between two readings;
the engine's idle burn over the same time (timers, heartbeats, polling) is measured separately
and subtracted where a cost per operation is reported, so the figures say what an operation
costs, not what the clock cost while it ran.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import psutil

from bench.percentiles import percentile
from bench.procfs import dir_mb, task_cpu_seconds

__all__ = [
    "Meter",
    "Reading",
    "cpu_by_process",
    "cpu_seconds",
    "dir_mb",
    "memory_mb",
    "percentile",
    "summary_ms",
    "tree",
]


def tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for proc in tree(pid):
        total += _process_cpu(proc)
    return total


def cpu_by_process(pid: int) -> dict[int, float]:
    """CPU seconds of each process in the tree, by pid: for a window in which processes come and go."""
    return {proc.pid: _process_cpu(proc) for proc in tree(pid)}


def _process_cpu(proc: psutil.Process) -> float:
    try:
        return task_cpu_seconds(proc.pid)
    except (OSError, ValueError, IndexError):
        try:
            t = proc.cpu_times()
        except psutil.NoSuchProcess:
            return 0.0
        return t.user + t.system


def memory_mb(pid: int) -> dict[str, float]:
    """RSS of the tree, and PSS (shared pages split among their users: PostgreSQL's shared buffers
    are counted once, not once per backend)."""
    rss = pss = 0.0
    for proc in tree(pid):
        try:
            rss += proc.memory_info().rss
            pss += proc.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return {"rss_mb": rss / 2**20, "pss_mb": pss / 2**20}


@dataclass
class Reading:
    at: float
    cpu: dict[str, float]


class Meter:
    """CPU of named process trees (plus this process, the load generator) between two readings."""

    def __init__(self, pids: Mapping[str, int | None]) -> None:
        self.pids = {name: pid for name, pid in pids.items() if pid is not None}

    def read(self) -> Reading:
        cpu = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        cpu["load generator"] = _process_cpu(psutil.Process())
        return Reading(time.monotonic(), cpu)

    @staticmethod
    def delta(before: Reading, after: Reading) -> tuple[float, dict[str, float]]:
        return after.at - before.at, {k: after.cpu[k] - before.cpu.get(k, 0.0) for k in after.cpu}

    def memory(self) -> dict[str, dict[str, float]]:
        return {name: memory_mb(pid) for name, pid in self.pids.items()}


def summary_ms(seconds: Iterable[float]) -> dict[str, float]:
    values = [s * 1000 for s in seconds]
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50), 2),
        "p90_ms": round(percentile(values, 90), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "max_ms": round(max(values), 2) if values else math.nan,
    }
