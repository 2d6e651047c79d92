"""The crash matrix's findings, printed in pytest's summary (see conftest.py)."""

from __future__ import annotations

ROWS: list[tuple[str, str, int, int, str]] = []
"""(kill point, outcome, duplicate side effects, extra model calls, where the kill landed), one per run."""


def lines() -> list[str]:
    head = f"{'kill point':<58} {'outcome':<10} {'dup. effects':>12} {'extra model calls':>17}  where it landed"
    return [head] + [f"{p:<58} {o:<10} {d:>12} {x:>17}  {w}" for p, o, d, x, w in ROWS]
