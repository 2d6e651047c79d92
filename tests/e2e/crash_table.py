"""The crash matrix's findings, printed in pytest's summary (see conftest.py)."""

from __future__ import annotations

ROWS: list[tuple[str, str, int, int]] = []
"""(kill point, outcome, duplicate side effects, extra model calls), one per run."""


def lines() -> list[str]:
    head = f"{'kill point':<44} {'outcome':<10} {'duplicate effects':>17} {'extra model calls':>17}"
    return [head] + [f"{p:<44} {o:<10} {d:>17} {x:>17}" for p, o, d, x in ROWS]
