"""The figures of an A/B run (`bench.servers`, `bench.partitions`): medians over rounds and the
closing line. Plain arithmetic, importable without the bench's measuring packages."""

from __future__ import annotations

import statistics
from typing import Any

Rows = list[dict[str, Any]]


def median(rows: Rows, key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def comparison(prefix: str, first: tuple[str, Rows], second: tuple[str, Rows], over: str) -> str:
    """Both sides' median CPU and throughput, and the side named `over` as a multiple of the
    other: `servers: hypercorn_cpu_ms=H granian_cpu_ms=G cpu_ratio=G/Hx hypercorn_per_s=A
    granian_per_s=B throughput_ratio=B/Ax` for `over="granian"`."""
    (a, ra), (b, rb) = first, second
    if over not in (a, b):
        raise ValueError(f"{over!r} is neither side ({a!r}, {b!r})")
    top, bottom = (ra, rb) if over == a else (rb, ra)
    return (
        f"{prefix}: {a}_cpu_ms={median(ra, 'cpu_ms'):.1f} {b}_cpu_ms={median(rb, 'cpu_ms'):.1f} "
        f"cpu_ratio={median(top, 'cpu_ms') / median(bottom, 'cpu_ms'):.2f}x "
        f"{a}_per_s={median(ra, 'per_s'):.2f} {b}_per_s={median(rb, 'per_s'):.2f} "
        f"throughput_ratio={median(top, 'per_s') / median(bottom, 'per_s'):.2f}x"
    )
