"""`python -m bench.list_shards`: what a page of the SKU list costs when the list is kept by key, at 100,000 SKUs.

Issue 36 asks for the SKUs page in under 0.5 s at 100,000 SKUs. Restate's SQL cannot give it
(`make bench-state-scan`: every query scans the partition). This measures the other way: the
product's own `SkuList` object (`replenisher.durable.sku_list`, 16 shards of 64 buckets each),
served alone on granian by a restate-server of its own (this repository's `restate.toml`, free
ports), filled with synthetic entries through the ingress, and read with the product's reader
(`replenisher.operations.restate.sku_list.list_page`), which asks every shard at once and merges.

At each size (filled in steps: 1,000, then 10,000, ...), every query below runs `--tries` times
(the median counts), and each answer is checked against the same query over every entry in memory
(`domain.sku_list.answer` over one list): the page's SKUs, the number matching and the chip counts
must agree, or the run fails. Reported: each query's time, the engine's and the service's CPU per
page, and one entry's put through the ingress. Each size ends with a line. Then, at the largest size,
the first page is read once a second while entries change at a steady rate (`CHURN`), each rate
with a line `list-shards: skus=N churn_puts_per_s=R page_ms_median=P page_ms_max=M`. The run ends with

    list-shards: skus=N page_ms=P page_ms_median=M middle_offset_ms=O first_read_ms=F put_ms=U shards=S

`page_ms` is the slowest query's median among the pages people turn to (the first, or the next by
its cursor); `middle_offset_ms` a page from half-way down by offset, where every shard sends half its
rows; `first_read_ms` the first page after the list was filled, when the service reads every bucket
(the first page after a restart costs the same).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx

from bench.probe_results import write_runs
from bench.probe_stack import running
from bench.procfs import group_cpu_seconds, task_cpu_seconds
from replenisher.domain.sku_list import SHARDS, ListEntry, ListPage, ShardQuery, answer, encode, merge
from replenisher.operations.restate.http import RestateHttp
from replenisher.operations.restate.sku_list import list_page, put_entries
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import AsgiApp
from replenisher.stack.reaper import reap_with_this_process
from replenisher.stack.runtime import BinaryRuntime

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"
PLANS = {"smoke": [300, 1_200], "quick": [1_000, 10_000], "full": [1_000, 10_000, 100_000]}
# At the largest size: entries changing at these rates a second, for this long. A plant of 100,000 SKUs
# checked once a business day (8 hours) writes about 3.5 a second; 50 is a burst.
CHURN = {"smoke": ([5.0], 2.0), "quick": ([5.0, 50.0], 10.0), "full": ([5.0, 50.0], 20.0)}
PER_PAGE = 100
FILL_BATCH = 1_000
NOW = 1_800_000_000.0
TOOLS = (None, None, "wait_for_approval", "wait_for_supplier_reply", "wait_for_goods")
OUTCOMES = (None, "received", "received", "rejected", "gave_up", "cancelled", "unknown")
# name: the query, and where its page starts: the first page, the middle of the list by offset (half
# the SKUs: every shard sends that many rows), or the middle by cursor (the page after the middle SKU).
Start = Literal["first", "offset", "cursor"]
QUERIES: dict[str, tuple[dict[str, Any], Start]] = {
    "by_sku": ({}, "first"),
    "by_sku_middle_offset": ({}, "offset"),
    "by_sku_middle_cursor": ({}, "cursor"),
    "waiting_longest": ({"sort": "waiting", "waiting": "someone"}, "first"),
    "outcome_newest": ({"sort": "outcome", "order": "desc"}, "first"),
    "stock_emptiest": ({"sort": "stock"}, "first"),
    "failing": ({"flag": "failing"}, "first"),
    "search": ({"q": "12"}, "first"),
}


def sku_of(i: int) -> str:
    return f"SKU-{i:06d}"


def entry_of(i: int) -> ListEntry:
    """A made-up entry, the same every run: a mix of waits, outcomes, stock and prices."""
    tool = TOOLS[i % len(TOOLS)] if i % 3 == 0 else None
    active = f"replenish-{sku_of(i)}-{i % 7 + 1}" if tool or i % 11 == 0 else None
    outcome = OUTCOMES[(i * 5) % len(OUTCOMES)]
    safety = 20 + i % 80
    return ListEntry(
        sku=sku_of(i),
        revision=1,
        watched=i % 10 != 0,
        runs=i % 7 + (1 if active else 0),
        active_run=active,
        waiting_tool=tool,
        waiting_since=NOW - (i * 7919) % 864_000 if tool else None,
        asked_price=5 + (i * 13) % 400 / 10 if active else None,
        outcome=outcome,
        ended_at=NOW - (i * 104_729) % 2_592_000 if outcome else None,
        on_hand=(i * 31) % 300,
        safety_stock=safety,
        cover_days=round(((i * 31) % 300) / (1 + i % 9), 2) if i % 13 else None,
        problem="stopped: the run's call is paused" if i % 97 == 0 else None,
        wait_run=i % 7 + 1 if active else None,
    )


def query_of(params: dict[str, Any], start: Start = "first", size: int = 0) -> tuple[ShardQuery, int]:
    """The query and its offset, for a list of `size` SKUs."""
    after = [sku_of(size // 2)] if start == "cursor" else None
    return ShardQuery(now=NOW, budget=30.0, upto=0, after=after, **params), size // 2 if start == "offset" else 0


def expected(entries: list[ListEntry], query: ShardQuery, offset: int) -> ListPage:
    """The page from every entry at once: what the shards' answers must merge to."""
    asked = query.model_copy(update={"upto": offset + PER_PAGE})
    return merge([answer([(e.sku, encode(e)) for e in entries], asked)], asked, offset, PER_PAGE)


def same(got: ListPage, want: ListPage) -> bool:
    return [e.sku for e in got.entries] == [e.sku for e in want.entries] and (got.matching, got.total, got.counts) == (
        want.matching,
        want.total,
        want.counts,
    )


class Probe:
    def __init__(self, http: RestateHttp, engine_pid: int, service_pgid: int) -> None:
        self.http = http
        self.engine_pid = engine_pid
        self.service_pgid = service_pgid

    def cpu(self) -> tuple[float, float]:
        return task_cpu_seconds(self.engine_pid), group_cpu_seconds(self.service_pgid)

    async def fill(self, entries: list[ListEntry]) -> float:
        began = time.monotonic()
        for start in range(0, len(entries), FILL_BATCH * SHARDS):
            batch = entries[start : start + FILL_BATCH * SHARDS]
            changed = await put_entries(self.http, batch)
            if changed != len(batch):
                raise RuntimeError(f"a fill put changed {changed} entries of {len(batch)}")
        return time.monotonic() - began

    async def timed(self, query: ShardQuery, offset: int, tries: int, want: ListPage) -> dict[str, float]:
        times = []
        engine0, service0 = self.cpu()
        for _ in range(tries):
            began = time.perf_counter()
            got = await list_page(self.http, query, offset, PER_PAGE)
            times.append(time.perf_counter() - began)
            if not same(got, want):
                raise RuntimeError(
                    f"the shards' page differs from the whole list's: {[e.sku for e in got.entries][:5]} "
                    f"matching {got.matching}, against {[e.sku for e in want.entries][:5]} matching {want.matching}"
                )
        engine1, service1 = self.cpu()
        return {
            "ms": round(statistics.median(times) * 1000, 1),
            "first_ms": round(times[0] * 1000, 1),
            "engine_cpu_ms": round((engine1 - engine0) * 1000 / tries, 1),
            "service_cpu_ms": round((service1 - service0) * 1000 / tries, 1),
        }

    async def put_ms(self, entries: list[ListEntry], tries: int) -> float:
        times = []
        for entry in entries[:tries]:
            newer = entry.model_copy(update={"revision": entry.revision + 1})
            began = time.perf_counter()
            if await put_entries(self.http, [newer]) != 1:
                raise RuntimeError(f"the put of {newer.sku}'s newer revision changed nothing")
            times.append(time.perf_counter() - began)
            entry.revision = newer.revision  # the in-memory list stays the same as the shards'
        return round(statistics.median(times) * 1000, 2)

    async def under_churn(self, entries: list[ListEntry], rate: float, seconds: float) -> dict[str, float]:
        """The first page by SKU, read once a second while entries change at `rate` a second (a newer
        revision with another stock figure, as a day's checks write them): the buckets they touch are
        read again by the next page. Each page must still hold the SKUs the whole list puts first."""
        want = [e.sku for e in expected(entries, *query_of({})).entries]
        stop = time.monotonic() + seconds
        rng = random.Random(rate)
        puts = 0

        async def put_steadily() -> None:
            nonlocal puts
            began = time.monotonic()
            while time.monotonic() < stop:
                entry = entries[rng.randrange(len(entries))]
                entry.revision += 1
                entry.on_hand = (entry.on_hand or 0) + 1
                if await put_entries(self.http, [entry]) != 1:
                    raise RuntimeError(f"the put of {entry.sku}'s newer revision changed nothing")
                puts += 1
                await asyncio.sleep(max(0.0, began + puts / rate - time.monotonic()))

        async def read_each_second() -> list[float]:
            times = []
            while time.monotonic() < stop:
                began = time.perf_counter()
                got = await list_page(self.http, query_of({})[0], 0, PER_PAGE)
                times.append(time.perf_counter() - began)
                if [e.sku for e in got.entries] != want or got.total != len(entries):
                    raise RuntimeError(f"a page read while entries changed lost rows: {got.total} of {len(entries)}")
                await asyncio.sleep(max(0.0, 1.0 - times[-1]))
            return times

        _, times = await asyncio.gather(put_steadily(), read_each_second())
        return {
            "puts_per_s": round(puts / seconds, 1),
            "page_ms_median": round(statistics.median(times) * 1000, 1),
            "page_ms_max": round(max(times) * 1000, 1),
            "pages": len(times),
        }


@asynccontextmanager
async def served(workdir: Path) -> AsyncIterator[Probe]:
    """A restate-server of its own and the `SkuList` object on granian, registered; stopped on the way out."""
    restate = BinaryRuntime(
        RestatePorts.free(),
        workdir / "restate-data",
        {},
        log_path=workdir / "restate.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    app = AsgiApp(
        "bench.list_shards_app:app",
        free_port(),
        {"PYTHONPATH": str(REPO_ROOT)},
        name="list",
        log_path=workdir / "app.log",
        server="granian",
    )
    with running(restate, app):
        assert restate.pid is not None and app.pid is not None
        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=5.0)) as client:
            yield Probe(RestateHttp(restate.ingress_url, restate.admin_url, client), restate.pid, app.pid)


async def measure(plan: str, tries: int, workdir: Path) -> list[dict[str, Any]]:
    sizes, (rates, seconds) = PLANS[plan], CHURN[plan]
    out: list[dict[str, Any]] = []
    async with served(workdir) as probe:
        entries: list[ListEntry] = []
        for size in sizes:
            more = [entry_of(i) for i in range(len(entries), size)]
            fill_s = await probe.fill(more)
            entries += more
            row: dict[str, Any] = {"skus": size, "shards": SHARDS, "fill_s": round(fill_s, 1)}
            for name, (params, start) in QUERIES.items():
                query, offset = query_of(params, start, size)
                row[name] = await probe.timed(query, offset, tries, expected(entries, query, offset))
            # The first read after the fill read every bucket again: the page after a restart costs that.
            row["first_read_ms"] = row[next(iter(QUERIES))]["first_ms"]
            row["put_ms"] = await probe.put_ms(entries, 20)
            # A page as people turn them: the first, or the next by its cursor. A page from an offset deep in
            # the list (every shard sends that many rows) is reported beside it, not hidden in it.
            medians = [row[name]["ms"] for name, (_, start) in QUERIES.items() if start != "offset"]
            row["page_ms"] = max(medians)
            row["page_ms_median"] = statistics.median(medians)
            row["middle_offset_ms"] = max(row[name]["ms"] for name, (_, start) in QUERIES.items() if start == "offset")
            print(line(row), flush=True)
            out.append(row)
        for rate in rates:
            churned = await probe.under_churn(entries, rate, seconds)
            out[-1].setdefault("churn", []).append(churned)
            print(churn_line(out[-1]["skus"], churned), flush=True)
    return out


def line(row: dict[str, Any]) -> str:
    each = " ".join(f"{name}_ms={row[name]['ms']:g}" for name in QUERIES)
    turned = [row[name] for name, (_, start) in QUERIES.items() if start != "offset"]
    engine = statistics.median(q["engine_cpu_ms"] for q in turned)
    service = statistics.median(q["service_cpu_ms"] for q in turned)
    return (
        f"list-shards: skus={row['skus']} {each} page_engine_cpu_ms={engine:g} page_service_cpu_ms={service:g} "
        f"first_read_ms={row['first_read_ms']:g} put_ms={row['put_ms']:g}"
    )


def churn_line(skus: int, churned: dict[str, float]) -> str:
    return (
        f"list-shards: skus={skus} churn_puts_per_s={churned['puts_per_s']:g} "
        f"page_ms_median={churned['page_ms_median']:g} page_ms_max={churned['page_ms_max']:g}"
    )


def closing_line(rows: list[dict[str, Any]]) -> str:
    large = rows[-1]
    return (
        f"list-shards: skus={large['skus']} page_ms={large['page_ms']:g} page_ms_median={large['page_ms_median']:g} "
        f"middle_offset_ms={large['middle_offset_ms']:g} first_read_ms={large['first_read_ms']:g} "
        f"put_ms={large['put_ms']:g} shards={large['shards']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.list_shards", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", choices=sorted(PLANS), default="quick", help="quick 1k,10k; full adds 100k")
    parser.add_argument("--out", type=Path, help="where the json goes (bench/results/list-shards-PLAN.json)")
    parser.add_argument("--tries", type=int, default=5, help="reads of each query per size; the median is kept")
    args = parser.parse_args(argv)
    if args.tries < 1:
        parser.error("--tries takes a positive number")
    reap_with_this_process()
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-list-shards-"))
    try:
        rows = asyncio.run(measure(args.plan, args.tries, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    settings = {"plan": args.plan, "tries": args.tries, "per_page": PER_PAGE}
    write_runs(args.out or RESULTS / f"list-shards-{args.plan}.json", settings, rows)
    print(closing_line(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
