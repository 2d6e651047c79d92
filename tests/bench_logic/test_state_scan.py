"""`python -m bench.state_scan` (bench/state_scan.py): its smoke plan end to end on a real
restate-server, and how its closing line is worked out. No figure is judged: a bench measures, a
test checks that it does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench.state_scan import PLANS, closing_line, entry_of, key_of

from bench_logic.smoke import run_bench, sizes_of

SIZE_LINE = re.compile(
    r"^state-scan: partitions=1 rows=(\d+) point_sql_ms=[0-9.]+ count_ms=[0-9.]+ page_ms=[0-9.]+ "
    r"paused_ms=[0-9.]+ journal_by_id_ms=[0-9.]+ point_handler_ms=[0-9.]+ us_per_row=[0-9.]+ "
    r"attempting_ms=[0-9.]+ few_by_id_ms=[0-9.]+ many_by_id_ms=[0-9.]+$"
)
CLOSING_LINE = re.compile(
    r"^state-scan: rows=(\d+) point_sql_vs_handler=\d+x point_sql_growth=\d+x \(from rows=(\d+)\)$"
)


@pytest.mark.slow
def test_the_smoke_plan_fills_every_key_and_ends_with_its_lines(tmp_path: Path) -> None:
    out = tmp_path / "state-scan.json"
    lines = run_bench("bench.state_scan", "--plan", "smoke", "--tries", "1", "--out", str(out))
    sizes = PLANS["smoke"]
    assert sizes_of(lines, SIZE_LINE) == sizes, lines
    closing = CLOSING_LINE.match(lines[-1])
    assert closing is not None and (int(closing.group(1)), int(closing.group(2))) == (sizes[-1], sizes[0]), lines[-1]
    runs = json.loads(out.read_text())["runs"]
    # Each size found what was put: one key's entry, every key's count, a full page, the journal.
    assert [(r["rows"], r["count_rows"], r["point_sql_rows"]) for r in runs] == [(n, 1, 1) for n in sizes]
    assert all(r["page_rows"] == 100 and r["journal_by_id_rows"] > 0 for r in runs), runs
    # Reads by id find every invocation asked for; the invoker attempts nothing once the keys are filled.
    assert [(r["few_by_id_rows"], r["many_by_id_rows"], r["attempting_rows"]) for r in runs] == [(10, 100, 0)] * 2


def test_the_closing_line_sets_the_largest_size_against_the_handler_and_the_smallest() -> None:
    def run(partitions: int, rows: int, point: float, handler: float) -> dict:
        return {"partitions": partitions, "rows": rows, "point_sql_ms": point, "point_handler_ms": handler}

    rows = [run(1, 1_000, 5.0, 5.0), run(1, 100_000, 440.0, 4.0), run(4, 1_000, 2.0, 5.0), run(4, 100_000, 110.0, 4.0)]
    assert (
        closing_line(rows) == "state-scan: rows=100000 point_sql_vs_handler=110x point_sql_growth=88x (from rows=1000)"
    )


def test_entries_sort_unlike_their_keys_so_a_page_by_entry_is_not_a_page_by_key() -> None:
    keys = [key_of(i) for i in range(50)]
    by_entry = sorted(keys, key=lambda k: entry_of(int(k.removeprefix("SKU-"))))
    assert by_entry != keys and sorted(by_entry) == keys
