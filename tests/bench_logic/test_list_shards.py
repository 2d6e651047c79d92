"""`python -m bench.list_shards` (bench/list_shards.py): its smoke plan end to end on a real
restate-server and the product's `SkuList` object on granian, and its closing line. No figure is
judged: the run itself checks every page against the whole list in memory, and fails if one differs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench.list_shards import CHURN, PLANS, QUERIES, closing_line, entry_of, expected, query_of, sku_of

from bench_logic.smoke import run_bench, sizes_of

SIZE_LINE = re.compile(
    r"^list-shards: skus=(\d+) "
    + " ".join(rf"{name}_ms=[0-9.]+" for name in QUERIES)
    + r" page_engine_cpu_ms=[0-9.]+ page_service_cpu_ms=[0-9.]+ first_read_ms=[0-9.]+ put_ms=[0-9.]+$"
)
CHURN_LINE = re.compile(r"^list-shards: skus=\d+ churn_puts_per_s=[0-9.]+ page_ms_median=[0-9.]+ page_ms_max=[0-9.]+$")
CLOSING_LINE = re.compile(
    r"^list-shards: skus=(\d+) page_ms=[0-9.]+ page_ms_median=[0-9.]+ middle_offset_ms=[0-9.]+ "
    r"first_read_ms=[0-9.]+ put_ms=[0-9.]+ shards=8$"
)


@pytest.mark.slow
def test_the_smoke_plan_reads_every_page_as_the_whole_list_has_it(tmp_path: Path) -> None:
    out = tmp_path / "list-shards.json"
    lines = run_bench("bench.list_shards", "--plan", "smoke", "--tries", "1", "--out", str(out))
    sizes = PLANS["smoke"]
    assert sizes_of(lines, SIZE_LINE) == sizes, lines
    closing = CLOSING_LINE.match(lines[-1])
    assert closing is not None and int(closing.group(1)) == sizes[-1], lines[-1]
    churned = [line for line in lines if CHURN_LINE.match(line)]
    assert len(churned) == len(CHURN["smoke"][0]), lines
    runs = json.loads(out.read_text())["runs"]
    assert [r["skus"] for r in runs] == sizes
    # While entries changed, pages were read and every one held the SKUs the whole list puts first.
    assert all(c["pages"] >= 1 and c["puts_per_s"] > 0 for c in runs[-1]["churn"]), runs[-1]["churn"]
    turned = [name for name, (_, start) in QUERIES.items() if start != "offset"]
    assert all(r["page_ms"] == max(r[name]["ms"] for name in turned) for r in runs), runs
    assert all(r["middle_offset_ms"] == r["by_sku_middle_offset"]["ms"] for r in runs), runs


def test_the_made_up_list_gives_every_query_something_to_find() -> None:
    """Else a query that finds nothing would pass its check against the whole list trivially."""
    entries = [entry_of(i) for i in range(PLANS["smoke"][0])]
    for name, (params, start) in QUERIES.items():
        page = expected(entries, *query_of(params, start, len(entries)))
        assert page.entries, name
        assert 0 < page.matching <= len(entries), name
    by_cursor = [e.sku for e in expected(entries, *query_of({}, "cursor", len(entries))).entries]
    by_offset = [e.sku for e in expected(entries, *query_of({}, "offset", len(entries))).entries]
    middle = len(entries) // 2
    assert by_offset == [sku_of(i) for i in range(middle, middle + 100)]
    assert by_cursor == [sku_of(i) for i in range(middle + 1, middle + 101)], "the page after the middle SKU"
    counts = expected(entries, *query_of({})).counts
    assert all(n > 0 for n in counts.values()), counts


def test_the_closing_line_is_the_largest_sizes() -> None:
    def run(skus: int, page: float) -> dict[str, float]:
        return {
            "skus": skus,
            "page_ms": page,
            "page_ms_median": 300.0,
            "middle_offset_ms": 800.0,
            "first_read_ms": 650.5,
            "put_ms": 4.25,
            "shards": 8,
        }

    assert closing_line([run(1_000, 9.0), run(100_000, 412.5)]) == (
        "list-shards: skus=100000 page_ms=412.5 page_ms_median=300 middle_offset_ms=800 first_read_ms=650.5 "
        "put_ms=4.25 shards=8"
    )
