"""`python -m bench.state_scan`: what one SQL query over Restate's `state` and `sys_invocation`
tables costs as they grow, against a point read through the object itself.

A restate-server of its own (this repository's `restate.toml`, on free ports) and one virtual object
(`bench/state_scan_app.py`, nothing of the product's code) whose keys each hold a record of
`--record-bytes` and a small list entry, the shape an agent's state would have with a list key beside
its record. The keys are filled in steps (1,000, then 10,000, ...: each step adds to the last), and
at each size every query runs a few times (the median is reported):

- `point_sql`: one key's list entry by `service_key = '...'`, the narrowest query there is;
- `count`: how many keys hold a list entry (a filter chip's count);
- `page`: 100 list entries in their sort order, from the 50th row on (a list's page);
- `paused`: the calls Restate paused, from `sys_invocation` (which also holds every finished call
  whose journal is kept: one per `put` here);
- `journal_by_id`: one call's journal by its invocation id, as a timeline reads it;
- `attempting`: what Restate's invoker attempts now (`sys_invocation_state`: nothing, here), where the
  product looks first for a refused service or a run retrying a step;
- `few_by_id`, `many_by_id`: 10 and 100 invocations from `sys_invocation` by `id IN (...)`;
- `point_handler`: the same one entry read by the object's shared handler through the ingress.

Each size ends with a line, and the run with the largest size's multiples:

    state-scan: partitions=P rows=N point_sql_ms=A count_ms=B page_ms=C paused_ms=D journal_by_id_ms=J
                point_handler_ms=E us_per_row=F attempting_ms=G few_by_id_ms=H many_by_id_ms=I
    state-scan: rows=N point_sql_vs_handler=Rx point_sql_growth=Gx (from rows=M)

Why it exists (#36): on Restate 1.7.12 a query names a partition at best (by `service_key`), never a
range inside it, so every query over `state` reads every key of the partition whatever its filter,
and one over `sys_invocation` every invocation kept. A list of 100,000 SKUs cannot page in 0.5 s
through SQL on one partition; the figures say by how much, and are the reproduction to take upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.probe_results import write_runs
from bench.probe_stack import running
from replenisher.operations.restate.http import RestateHttp, among, literal
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import HypercornApp
from replenisher.stack.reaper import reap_with_this_process
from replenisher.stack.runtime import BinaryRuntime

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "bench" / "results"
OBJECT = "StateScanProbe"
PLANS = {"smoke": [200, 400], "quick": [1_000, 10_000], "full": [1_000, 10_000, 100_000]}
PAGE = 100
PAGE_OFFSET = 50
FILL_CONCURRENCY = 64
# Invocations read by id: a few (as `operations/restate/attempting.py` reads them) and many.
FEW_IDS = 10
BY_IDS = 100
FILL_TIMEOUT_S = 1800.0


def key_of(i: int) -> str:
    return f"SKU-{i:06d}"


def entry_of(i: int) -> str:
    """A sortable entry, in an order unlike the keys' (as a list's outcome sort is): a hash first."""
    return f"{hashlib.blake2b(key_of(i).encode(), digest_size=4).hexdigest()}|{key_of(i)}"


def queries(probe_key: str, invocation_ids: list[str]) -> dict[str, str]:
    """The queries by name; `invocation_ids`: `BY_IDS` invocations' ids, the first the probe key's."""
    where = f"service_name = {literal(OBJECT)}"
    key = literal(probe_key)
    few, many = among(invocation_ids[:FEW_IDS]), among(invocation_ids)
    return {
        "point_sql": f"SELECT value_utf8 FROM state WHERE {where} AND key = 'list' AND service_key = {key}",
        "count": f"SELECT COUNT(*) AS n FROM state WHERE {where} AND key = 'list'",
        "page": (
            f"SELECT service_key, value_utf8 FROM state WHERE {where} AND key = 'list' "
            f"ORDER BY value_utf8 LIMIT {PAGE} OFFSET {PAGE_OFFSET}"
        ),
        "paused": "SELECT id FROM sys_invocation WHERE status = 'paused'",
        "journal_by_id": f"SELECT index, entry_type FROM sys_journal WHERE id = {literal(invocation_ids[0])}",
        "attempting": "SELECT id, last_failure FROM sys_invocation_state",
        "few_by_id": f"SELECT id, status, target FROM sys_invocation WHERE id IN {few}",
        "many_by_id": f"SELECT id, status, target FROM sys_invocation WHERE id IN {many}",
    }


class Probe:
    def __init__(self, restate: BinaryRuntime, client: httpx.AsyncClient) -> None:
        self.restate = restate
        self.client = client
        self.sql = RestateHttp(restate.ingress_url, restate.admin_url, client).sql

    async def fill(self, start: int, stop: int, record_bytes: int) -> float:
        """Keys `start` to `stop` filled through the ingress; seconds until Restate has run every put."""
        began = time.monotonic()
        gate = asyncio.Semaphore(FILL_CONCURRENCY)

        async def put(i: int) -> None:
            body = {"record": os.urandom(record_bytes // 2).hex(), "entry": entry_of(i)}
            async with gate:
                r = await self.client.post(f"{self.restate.ingress_url}/{OBJECT}/{key_of(i)}/put/send", json=body)
                r.raise_for_status()

        await asyncio.gather(*(put(i) for i in range(start, stop)))
        deadline = time.monotonic() + FILL_TIMEOUT_S
        while True:
            rows = await self.sql(
                f"SELECT COUNT(*) AS n FROM sys_invocation WHERE target_service_name = {literal(OBJECT)} "
                "AND status != 'completed'"
            )
            if int(rows[0]["n"]) == 0:
                return time.monotonic() - began
            if time.monotonic() > deadline:
                raise TimeoutError(f"{rows[0]['n']} puts still not done after {FILL_TIMEOUT_S:.0f} s")
            await asyncio.sleep(1.0)

    async def timed(self, query: str, tries: int) -> tuple[float, int]:
        times, rows = [], 0
        for _ in range(tries):
            began = time.perf_counter()
            rows = len(await self.sql(query))
            times.append(time.perf_counter() - began)
        return statistics.median(times) * 1000, rows

    async def handler_read_ms(self, keys: list[str]) -> float:
        times = []
        for key in keys:
            began = time.perf_counter()
            r = await self.client.post(f"{self.restate.ingress_url}/{OBJECT}/{key}/entry", json=None)
            r.raise_for_status()
            times.append(time.perf_counter() - began)
        return statistics.median(times) * 1000


async def measure(partitions: int, sizes: list[int], record_bytes: int, tries: int, workdir: Path) -> list[dict]:
    """Every size on one restate-server with `partitions` partitions, filled step by step."""
    base = workdir / f"p{partitions}"
    base.mkdir(parents=True)
    restate = BinaryRuntime(
        RestatePorts.free(),
        base / "restate-data",
        {"RESTATE_DEFAULT_NUM_PARTITIONS": str(partitions)},
        log_path=base / "restate.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    app = HypercornApp(
        "bench.state_scan_app:app", free_port(), {"PYTHONPATH": str(REPO_ROOT)}, name="probe", log_path=base / "app.log"
    )
    rows_out: list[dict] = []
    with running(restate, app):
        async with httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=5.0)) as client:
            probe = Probe(restate, client)
            filled = 0
            for size in sizes:
                fill_s = await probe.fill(filled, size, record_bytes)
                filled = size
                probe_key = key_of(size // 2)
                target = literal(f"{OBJECT}/{probe_key}/put")
                found_id = await probe.sql(f"SELECT id FROM sys_invocation WHERE target = {target}")
                others = await probe.sql(
                    f"SELECT id FROM sys_invocation_status WHERE target <> {target} LIMIT {BY_IDS - 1}"
                )
                invocation_ids = [str(r["id"]) for r in [*found_id, *others]]
                row: dict[str, Any] = {"partitions": partitions, "rows": size, "fill_s": round(fill_s, 1)}
                for name, query in queries(probe_key, invocation_ids).items():
                    ms, found = await probe.timed(query, tries)
                    row[f"{name}_ms"] = round(ms, 1)
                    row[f"{name}_rows"] = found
                sample = [key_of(i) for i in range(0, size, max(1, size // 20))]
                row["point_handler_ms"] = round(await probe.handler_read_ms(sample), 2)
                row["us_per_row"] = round(row["count_ms"] * 1000 / size, 2)
                if (
                    row["count_rows"] != 1
                    or row["point_sql_rows"] != 1
                    or row["page_rows"] != PAGE
                    or not row["journal_by_id_rows"]
                    or row["few_by_id_rows"] != FEW_IDS
                    or row["many_by_id_rows"] != BY_IDS
                ):
                    raise RuntimeError(f"the queries did not find what was put: {row}")
                print(line(row), flush=True)
                rows_out.append(row)
    return rows_out


def line(row: dict) -> str:
    return (
        f"state-scan: partitions={row['partitions']} rows={row['rows']} point_sql_ms={row['point_sql_ms']:g} "
        f"count_ms={row['count_ms']:g} page_ms={row['page_ms']:g} paused_ms={row['paused_ms']:g} "
        f"journal_by_id_ms={row['journal_by_id_ms']:g} point_handler_ms={row['point_handler_ms']:g} "
        f"us_per_row={row['us_per_row']:g} attempting_ms={row['attempting_ms']:g} "
        f"few_by_id_ms={row['few_by_id_ms']:g} many_by_id_ms={row['many_by_id_ms']:g}"
    )


def closing_line(rows: list[dict]) -> str:
    """The first partition count's largest size: the SQL point read against the handler's, and
    against the same query at the smallest size."""
    first = [r for r in rows if r["partitions"] == rows[0]["partitions"]]
    small, large = first[0], first[-1]
    vs_handler = large["point_sql_ms"] / max(large["point_handler_ms"], 0.01)
    growth = large["point_sql_ms"] / max(small["point_sql_ms"], 0.01)
    return (
        f"state-scan: rows={large['rows']} point_sql_vs_handler={vs_handler:.0f}x "
        f"point_sql_growth={growth:.0f}x (from rows={small['rows']})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_scan", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--plan",
        choices=sorted(PLANS),
        default="quick",
        help="sizes: quick 1k,10k; full adds 100k; smoke for the tests",
    )
    parser.add_argument("--out", type=Path, help="where the json goes (bench/results/state-scan-PLAN.json)")
    parser.add_argument("--partitions", type=int, nargs="+", default=[1], metavar="P", help="partition counts (1)")
    parser.add_argument("--record-bytes", type=int, default=3000, help="each key's record (3000)")
    parser.add_argument("--tries", type=int, default=5, help="runs of each query per size; the median is kept")
    args = parser.parse_args(argv)
    if any(p < 1 for p in args.partitions) or args.record_bytes < 2 or args.tries < 1:
        parser.error("--partitions, --record-bytes and --tries take positive numbers")
    reap_with_this_process()
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-state-scan-"))
    try:
        rows: list[dict] = []
        for partitions in args.partitions:
            rows += asyncio.run(measure(partitions, PLANS[args.plan], args.record_bytes, args.tries, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    settings = {"plan": args.plan, "record_bytes": args.record_bytes, "tries": args.tries}
    write_runs(args.out or RESULTS / f"state-scan-{args.plan}.json", settings, rows)
    print(closing_line(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
