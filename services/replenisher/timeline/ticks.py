"""Where a time axis puts its gridlines: at round values of the unit its labels are in.

A run of 3.4 days gets gridlines at days 0, 1, 2 and 3, not at 0, 1.1, 2.2 and 3.4; one of
95 seconds at 0, 30, 60 and 90 seconds. Pure: offsets in seconds from the axis's start, with
their labels; the renderers place them.
"""

from __future__ import annotations

from math import floor, log10

# Round steps for an axis of durations, in seconds: a clock's own multiples, so that
# gridlines fall on whole minutes and hours rather than on 50 s or 200 min.
SECONDS = (1, 2, 5, 10, 15, 30)
MINUTES = (1, 2, 5, 10, 15, 30)
HOURS = (1, 2, 3, 6, 12)
DURATION_STEPS: tuple[float, ...] = (
    *(m * 10.0**e for e in (-3, -2, -1) for m in (1, 2, 5)),
    *SECONDS,
    *(60 * m for m in MINUTES),
    *(3600 * h for h in HOURS),
)
UNITS: tuple[tuple[float, str], ...] = ((86_400, "d"), (3600, "h"), (60, "min"), (1, "s"), (0.001, "ms"))


def round_step(raw: float) -> float:
    """The smallest of 1, 2 or 5 times a power of ten that is at least `raw`."""
    if raw <= 0:
        return 1.0
    magnitude = 10.0 ** floor(log10(raw))
    for m in (1, 2, 5, 10):
        if m * magnitude >= raw * (1 - 1e-9):
            return m * magnitude
    return 10 * magnitude


def offsets(total: float, step: float) -> list[float]:
    """0, step, 2·step … up to `total` (never past it)."""
    count = floor(total / step + 1e-9)
    return [k * step for k in range(count + 1)]


def number(value: float) -> str:
    """A tick's value without float noise or a trailing `.0`: 0.30000000000000004 -> `0.3`."""
    return f"{round(value, 6):g}"


def day_ticks(total: float, day_seconds: float, most: int = 6) -> list[tuple[float, str]]:
    """Gridlines for an axis labelled in days since the start, `day_seconds` long each."""
    if total <= 0 or day_seconds <= 0:
        return [(0.0, "day 0")]
    step = round_step(total / day_seconds / most)
    return [(d * day_seconds, f"day {number(d)}") for d in offsets(total / day_seconds, step)]


def duration_step(total: float, most: int) -> float:
    raw = total / most
    for step in DURATION_STEPS:
        if step >= raw * (1 - 1e-9):
            return step
    return round_step(raw / 86_400) * 86_400


def duration_ticks(total: float, most: int = 6) -> list[tuple[float, str]]:
    """Gridlines for an axis labelled in time since the start (`0`, `+30s`, `+1min` …)."""
    if total <= 0:
        return [(0.0, "0")]
    step = duration_step(total, most)
    size, unit = next((s, u) for s, u in UNITS if step >= s * (1 - 1e-9))
    return [(t, "0" if t == 0 else f"+{number(t / size)}{unit}") for t in offsets(total, step)]
