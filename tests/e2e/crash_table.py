"""The crash matrix's findings, printed in pytest's summary (see conftest.py).

A test records its row with `record`; the row travels on the test's report (`user_properties`,
which pytest-xdist carries from a worker to the controller), and `collect` gathers it where the
summary is printed, so the table is whole whether the suite runs in one process or in several.
"""

from __future__ import annotations

import pytest

Row = tuple[str, str, int, int, str]
"""(kill point, outcome, duplicate side effects, extra model calls, where the kill landed), one per run."""

KEY = "crash_table_row"
_pending: list[Row] = []
ROWS: list[Row] = []


def record(row: Row) -> None:
    """Called by a test; attached to that test's report by `attach`."""
    _pending.append(row)


def attach(report: pytest.TestReport) -> None:
    """Moves the rows the test just recorded onto its report."""
    while _pending:
        report.user_properties.append((KEY, _pending.pop(0)))


def collect(report: pytest.TestReport) -> None:
    ROWS.extend(tuple(value) for key, value in report.user_properties if key == KEY)  # type: ignore[misc]


def lines() -> list[str]:
    head = f"{'kill point':<58} {'outcome':<10} {'dup. effects':>12} {'extra model calls':>17}  where it landed"
    return [head] + [f"{p:<58} {o:<10} {d:>12} {x:>17}  {w}" for p, o, d, x, w in ROWS]
