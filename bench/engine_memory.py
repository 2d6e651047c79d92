"""`python -m bench.engine_memory`: what holds restate-server's memory as replenishments wait
(issue 33, item 3), at RocksDB memory budgets taken in turn.

Each round starts our system afresh (`bench.systems.Ours`: restate-server from `restate.toml` with one
setting changed, the real service, the world; the 1 s inactivity timeout, so waiting runs suspend)
and leaves `--sizes` runs waiting for their approval, as the main bench's idle-cost points do. At
each size it reads the engine's memory from /proc (RSS and PSS of restate-server) and what RocksDB
says it holds from the node's `/metrics`: the block cache's use (the memtables are charged to it by
Restate's write buffer manager, so it includes them) and capacity, and the memtables' own figures.
What RSS holds beyond the block cache is the rest of the engine (the partition processor, the
invoker, the log's record cache, the query engine, the allocator's slack).

The budgets take turns (`--budgets`, default restate.toml's 256 MiB and 128 MiB). Each size ends
with a line, and the run with each budget's growth per waiting run from the first size to the last:

    engine-memory: budget=B waiting=N rss_mb=R pss_mb=P block_cache_mb=C memtables_mb=M rest_mb=O
    engine-memory: budget=B kb_per_waiting_run=K block_cache_kb=C rest_kb=O (from W1 to W3 waiting)
                   last_step_kb=L (from W2)

(`last_step_kb`: the RSS a waiting run added over the last step alone, once the cache has filled.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"
JSON = dict[str, Any]
MIB = 2**20
SETTING = "RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE"
METRIC = re.compile(r"^(restate_rocksdb_[a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$")


def rocksdb_figures(metrics_text: str) -> JSON:
    """RocksDB's memory from Restate's Prometheus text: the shared block cache's use, pinned part and
    capacity (the same on every database's line: one cache), the write buffer manager's use and
    capacity, and each `restate_rocksdb_memory_*` gauge summed over the databases."""
    cache: dict[str, float] = {}
    summed: dict[str, float] = {}
    for line in metrics_text.splitlines():
        m = METRIC.match(line)
        if m is None:
            continue
        name, value = m.group(1), float(m.group(3))
        if name.startswith("restate_rocksdb_block_cache_") and name.endswith(("usage_bytes", "capacity_bytes")):
            cache[name] = max(cache.get(name, 0.0), value)
        elif name.startswith("restate_rocksdb_memory_"):
            summed[name] = summed.get(name, 0.0) + value
    mb = {k.removeprefix("restate_rocksdb_").removesuffix("_bytes"): round(v / MIB, 2) for k, v in cache.items()}
    mb |= {k.removeprefix("restate_rocksdb_").removesuffix("_bytes"): round(v / MIB, 2) for k, v in summed.items()}
    return mb


def point_line(budget: str, point: JSON) -> str:
    engine = point["memory_mb"]["engine"]
    rocks = point["observed"]
    return (
        f"engine-memory: budget={budget.replace(' ', '')} waiting={point['waiting']} rss_mb={engine['rss_mb']:g} "
        f"pss_mb={engine['pss_mb']:g} block_cache_mb={rocks.get('block_cache_usage', 0):g} "
        f"memtables_mb={rocks.get('memory_approx_memtable', 0):g} rest_mb={rest_mb(point):g}"
    )


def rest_mb(point: JSON) -> float:
    """The engine's RSS beyond the block cache (which holds the memtables too)."""
    return round(point["memory_mb"]["engine"]["rss_mb"] - point["observed"].get("block_cache_usage", 0.0), 1)


def _rss(point: JSON) -> float:
    return float(point["memory_mb"]["engine"]["rss_mb"])


def _per_run(first: JSON, last: JSON, mb: Callable[[JSON], float]) -> float:
    runs = last["waiting"] - first["waiting"]
    return round((mb(last) - mb(first)) * 1024 / runs, 2) if runs > 0 else 0.0


def growth(budget: str, points: list[JSON]) -> JSON:
    """KB per waiting run from the first size to the last: of the engine's RSS, of its block cache, of
    the rest; and of its RSS over the last step alone (once the cache has filled, what a run adds)."""
    first, last = points[0], points[-1]

    def cache(p: JSON) -> float:
        return float(p["observed"].get("block_cache_usage", 0.0))

    return {
        "budget": budget,
        "from_waiting": first["waiting"],
        "to_waiting": last["waiting"],
        "kb_per_waiting_run": _per_run(first, last, _rss),
        "block_cache_kb": _per_run(first, last, cache),
        "rest_kb": _per_run(first, last, rest_mb),
        "last_step_from_waiting": points[-2]["waiting"] if len(points) > 1 else last["waiting"],
        "last_step_kb": _per_run(points[-2], last, _rss) if len(points) > 1 else 0.0,
    }


def growth_line(g: JSON) -> str:
    return (
        f"engine-memory: budget={g['budget'].replace(' ', '')} kb_per_waiting_run={g['kb_per_waiting_run']:g} "
        f"block_cache_kb={g['block_cache_kb']:g} rest_kb={g['rest_kb']:g} "
        f"(from {g['from_waiting']} to {g['to_waiting']} waiting) last_step_kb={g['last_step_kb']:g} "
        f"(from {g['last_step_from_waiting']})"
    )


async def one_round(budget: str, sizes: list[int], settle: float, workdir: Path) -> list[JSON]:
    import aiohttp
    import httpx

    from bench.run import say
    from bench.scenarios import Driver
    from bench.systems import Ours

    system = Ours(workdir, inactivity_timeout="1s", name="restate-memory", engine_env={SETTING: budget})
    metrics_url = ""

    async def observe() -> JSON:
        async with httpx.AsyncClient(timeout=10.0) as client:
            return rocksdb_figures((await client.get(metrics_url)).text)

    try:
        system.start()
        metrics_url = f"http://127.0.0.1:{system.restate.restate_ports.node}/metrics"
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
            driver = Driver(system, session, say)
            points = await driver.idle_cost(sizes, wakes=0, settle=settle, observe=observe)
    finally:
        system.stop()
    for point in points:
        print(point_line(budget, point), flush=True)
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine_memory", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--budgets", nargs="+", default=["256 MiB", "128 MiB"], help="rocksdb-total-memory-size values, in turn"
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 10_000], help="waiting runs")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait at each size before reading")
    parser.add_argument("--out", type=Path, help="where the json goes (bench/results/engine-memory.json)")
    args = parser.parse_args(argv)
    if sorted(args.sizes) != args.sizes or len(args.sizes) < 2 or args.sizes[0] < 1:
        parser.error("--sizes takes at least two sizes, growing, from 1")
    from replenisher.stack.reaper import reap_with_this_process

    reap_with_this_process()
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-engine-memory-"))
    rounds: list[JSON] = []
    try:
        for i, budget in enumerate(args.budgets):
            points = asyncio.run(one_round(budget, args.sizes, args.settle, workdir / f"round{i}"))
            rounds.append({"budget": budget, "points": points, "growth": growth(budget, points)})
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    meta = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores",
        "sizes": args.sizes,
        "setting": SETTING,
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    out = args.out or RESULTS / "engine-memory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rounds": rounds}, indent=1) + "\n")
    print(f"written {out}", file=sys.stderr)
    for r in rounds:
        print(growth_line(r["growth"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
