"""Where a timeline's axis puts its gridlines: round values of the unit it is labelled in."""

from __future__ import annotations

import pytest

from replenisher.timeline.ticks import day_ticks, duration_ticks, round_step

DAY = 86_400.0


@pytest.mark.parametrize(("raw", "step"), [(0.57, 1.0), (1.0, 1.0), (1.2, 2.0), (3.1, 5.0), (7.0, 10.0), (0.013, 0.02)])
def test_a_step_is_one_two_or_five_times_a_power_of_ten(raw: float, step: float) -> None:
    assert round_step(raw) == pytest.approx(step)


def test_a_run_of_three_and_a_bit_days_gets_a_gridline_a_day() -> None:
    assert [label for _, label in day_ticks(3.4 * DAY, DAY)] == ["day 0", "day 1", "day 2", "day 3"]


def test_a_short_run_gets_tenths_of_a_day_without_float_noise() -> None:
    ticks = day_ticks(0.7 * DAY, DAY)
    assert [label for _, label in ticks] == ["day 0", "day 0.2", "day 0.4", "day 0.6"]
    assert all(offset <= 0.7 * DAY for offset, _ in ticks), "no gridline past the end of the chart"


def test_a_long_run_gets_at_most_seven_gridlines() -> None:
    ticks = day_ticks(40 * DAY, DAY)
    assert [label for _, label in ticks] == ["day 0", "day 10", "day 20", "day 30", "day 40"]
    assert all(len(day_ticks(n * DAY, DAY)) <= 7 for n in range(1, 400))


@pytest.mark.parametrize(
    ("total", "labels"),
    [
        (95.0, ["0", "+30s", "+60s", "+90s"]),
        (3700.0, ["0", "+15min", "+30min", "+45min", "+60min"]),
        (0.3, ["0", "+50ms", "+100ms", "+150ms", "+200ms", "+250ms", "+300ms"]),
        (5 * DAY, ["0", "+1d", "+2d", "+3d", "+4d", "+5d"]),
    ],
)
def test_durations_fall_on_the_clocks_multiples(total: float, labels: list[str]) -> None:
    assert [label for _, label in duration_ticks(total)] == labels


def test_an_empty_span_still_has_its_start() -> None:
    assert day_ticks(0.0, DAY) == [(0.0, "day 0")]
    assert duration_ticks(0.0) == [(0.0, "0")]
