"""`python -m bench.scale` (`make bench-scale`): N SKUs under watch on a real stack, ticking for a few
business days on a compressed clock, and what that costs.

Each size gets a stack of its own (`bench.own_stack`: restate-server from the project's
`restate.toml`, the simulated world, the service on its default server), on a 7-day site calendar
open all day, so every calendar day is a business day and each SKU checks once a day at its own
time of it (`domain.sku.check_fraction`). The world stocks N SKUs well above safety stock, so every
tick is an idle check: a stock read, nothing started. Then, per size:

- **watch set-up**: every SKU is put under watch (`SkuAgent/<sku>/watch`, daily) through the
  ingress, a few at a time; the rate is SKUs per second over the whole set-up.
- **ticking**: half a day after the last watch (by then each SKU's ticks fall at its own time of
  day), `days` business days are measured. CPU per process is read from /proc for the process
  group each stack process leads (engine: restate-server; service: granian and its workers; world),
  less the idle burn measured on the same stack before any SKU existed, and divided by the ticks
  Restate completed in that window.
- **lateness** comes from Restate's own records, not the agent's: for each `SkuAgent/tick`
  invocation due in the window (`sys_invocation.scheduled_start_at`), how long after that it
  started running (`running_at`) and was done (`completed_at`); a tick not yet started or done when
  the window is read counts as late by the time it has waited. The line's `late_p99_s` and "on time"
  go by when ticks were done. In wall-clock seconds (the compressed clock's, not the calendar's).
- **engine memory** (PSS of restate-server) and **disk** (its data directory's growth from the
  empty stack, per SKU), at the end of the window.
- **the list views**: the console's `/skus` (its first page, over real HTTP, from a console
  started on the stack) and `replenisher skus` (its first page, the real CLI in a child process),
  each timed three times after the window; the median counts, the first is kept too. Both read the
  SKU list kept by key; where the console's time goes is measured part by part (`list_breakdown`),
  and so is the page built from every agent's record, as with the service down (`breakdown`).

The run writes `bench/results/scale-<plan>.json` and ends with one line for the largest N:

    scale: skus=N ticks=T late_p99_s=L cpu_ms_per_tick=C engine_mb=E skus_page_ms=P

Plans: `quick` (1,000 SKUs, within ten minutes on a 2-core machine), `full` (1,000, 10,000 and
100,000), `smoke` (20 SKUs, one short day: the test's). `--sizes` runs other sizes with the
plan's days.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx
from pydantic import BaseModel, Field

from bench.own_stack import REPO_ROOT, OwnStack, start_own_stack
from bench.percentiles import percentile
from bench.procfs import (
    connections_by_pid,
    dir_mb,
    group_cpu_seconds,
    group_memory_mb,
    group_pids,
    task_cpu_seconds,
)
from replenisher.config import service_workers, variable
from replenisher.console import pages
from replenisher.domain.sku_list import ShardQuery
from replenisher.operations.catalogue import ErpCatalogue
from replenisher.operations.overview import SkuQuery, page_of, sku_rows
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.http import RestateHttp
from replenisher.operations.restate.paused import RecentPaused, paused_ids
from replenisher.operations.restate.sku_list import read_list
from replenisher.operations.sku_page import listed_page
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp, restate_env_for_workers, service_server

JSON = dict[str, Any]
RESULTS = REPO_ROOT / "bench" / "results"
CONSOLE_APP = "replenisher.console.app:create_app()"
SEVEN_DAYS = "# every calendar day a business day, open all day: one tick per SKU per calendar day\n"
SEVEN_DAYS += "working_days = Mon Tue Wed Thu Fri Sat Sun\n"
ON_TIME_P99_S = 1.0
"""Ticks are on time when 99% of them are done within a second of when they were due (issue 36). Done,
not started: Restate starts a due tick at once and the service takes it, so under a load it cannot
keep up with, ticks start on time and wait in the service for their stock read (seen at 10,000 SKUs:
started within 0.07 s, done 58 s late, p99)."""
IDLE_SECONDS = 5.0
SETTLE_DAYS = 0.5
"""After the last watch: each SKU's second tick falls within half a day of a day after its watch,
so from then on the ticks come at the SKUs' own times of day, a steady N a day."""
LIST_TRIES = 3


class ScalePlan(BaseModel):
    name: str
    sizes: list[int] = Field(min_length=1)
    days: float = Field(gt=0, description="business days of ticking measured")
    day_seconds: dict[int, float] = Field(description="the compressed day's wall seconds, per size")
    watch_concurrency: int = 32

    def day_of(self, size: int) -> float:
        """A size's day: its own, else the one of the nearest size the plan names."""
        if size in self.day_seconds:
            return self.day_seconds[size]
        nearest = min(self.day_seconds, key=lambda n: abs(n - size))
        return self.day_seconds[nearest] * max(1.0, size / nearest)


# The ticks' rate is N / day_seconds: 17/s for the quick plan, 167/s at 10,000 and at 100,000 (a
# 600 s day there: a shorter one would make it a test of saturation, not of size). A real day
# (86,400 s) makes 1.2 ticks/s of 100,000 SKUs.
QUICK = ScalePlan(name="quick", sizes=[1000], days=3, day_seconds={1000: 60})
FULL = ScalePlan(name="full", sizes=[1000, 10_000, 100_000], days=3, day_seconds={1000: 60, 10_000: 60, 100_000: 600})
SMOKE = ScalePlan(name="smoke", sizes=[20], days=1, day_seconds={20: 6}, watch_concurrency=8)
PLANS = {plan.name: plan for plan in (QUICK, FULL, SMOKE)}

Say = Callable[[str], None]


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def sku_name(i: int) -> str:
    return f"SCALE-{i:06d}"


def epoch(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


async def in_parallel(items: Iterable[str], work: Callable[[str], Awaitable[None]], concurrency: int) -> None:
    """`work` on every item, `concurrency` at a time; the first failure stops the rest."""
    queue = iter(items)

    async def worker() -> None:
        for item in queue:
            await work(item)

    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())


def checked(response: httpx.Response, what: str) -> None:
    if response.is_error:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:300]}")


class Processes:
    """CPU and memory of the stack's three process groups, from /proc."""

    def __init__(self, stack: OwnStack) -> None:
        self.pgids: dict[str, int] = {}
        for role, process in (("engine", stack.restate), ("service", stack.service), ("world", stack.world)):
            assert process.pid is not None, f"{role} is not running"
            self.pgids[role] = process.pid

    def cpu(self) -> dict[str, float]:
        return {role: group_cpu_seconds(pgid) for role, pgid in self.pgids.items()}

    def service_cpu(self) -> dict[int, float]:
        """CPU seconds of each process of the service's group (the server's supervisor and workers)."""
        cpu = {}
        for pid in group_pids(self.pgids["service"]):
            with contextlib.suppress(OSError, ValueError, IndexError):
                cpu[pid] = task_cpu_seconds(pid)
        return cpu

    def memory(self) -> dict[str, dict[str, float]]:
        return {role: group_memory_mb(pgid) for role, pgid in self.pgids.items()}


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {role: after[role] - before[role] for role in after}


RESENDS = 3


async def idempotent(send: Callable[[], Awaitable[httpx.Response]], what: str) -> httpx.Response:
    """A call that may be sent again (a PUT, a watch), sent again when the connection failed under
    it: a pooled keep-alive connection the server closed as idle just as it was reused is a
    ReadError without the call having been read (it ended a 100,000-SKU run's set-up once)."""
    for attempt in range(1, RESENDS + 1):
        try:
            return await send()
        except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError) as e:
            if attempt == RESENDS:
                raise RuntimeError(f"{what}: the connection failed {RESENDS} times, last: {e!r}") from e
    raise AssertionError("unreachable")


async def set_up_world(world: httpx.AsyncClient, skus: list[str], concurrency: int) -> None:
    supplier = {"name": "Scale Parts", "prices": {}, "lead_days": 2, "reply_days": 1}
    checked(await world.put("/admin/suppliers/scale-parts", json=supplier), "the supplier")
    # Far above safety stock and not consumed: every tick is a check that starts nothing.
    item = {"on_hand": 1000, "safety_stock": 10, "target_stock": 100, "suppliers": ["scale-parts"]}

    async def put(sku: str) -> None:
        what = f"item {sku}"
        checked(await idempotent(lambda: world.put(f"/admin/items/{sku}", json=item), what), what)

    await in_parallel(skus, put, concurrency)


async def watch_all(ingress: httpx.AsyncClient, skus: list[str], concurrency: int, say: Say) -> float:
    """Every SKU under watch, daily; the seconds it took."""
    done = 0
    started = time.monotonic()

    async def watch(sku: str) -> None:
        nonlocal done
        what = f"watch {sku}"
        watching = {"interval_days": 1}
        checked(await idempotent(lambda: ingress.post(f"/SkuAgent/{sku}/watch", json=watching), what), what)
        done += 1
        if done % max(1, len(skus) // 5) == 0:
            say(f"  {done} of {len(skus)} under watch ({done / (time.monotonic() - started):.0f}/s)")

    await in_parallel(skus, watch, concurrency)
    return time.monotonic() - started


TICKS = (
    "SELECT id, status, scheduled_at, scheduled_start_at, running_at, completed_at FROM sys_invocation "
    "WHERE target_service_name = 'SkuAgent' AND target_handler_name = 'tick' ORDER BY created_at"
)
"""Every tick Restate holds (a finished one for the journal's retention, 14 days). Filtered here, not
in the query: restate-server 1.7.12 answered a filter on `scheduled_start_at` with no rows, and a
query of only the three times with rows whose times were missing; asked so, it answers them all."""


def due_between(rows: list[JSON], start: float, end: float) -> list[JSON]:
    """The ticks whose timer was due from `start` to `end` (a first tick, sent at once, has no due time)."""
    return [r for r in rows if (due := epoch(r.get("scheduled_start_at"))) is not None and start <= due < end]


def completed_between(rows: list[JSON], start: float, end: float) -> int:
    return sum(1 for r in rows if (done := epoch(r.get("completed_at"))) is not None and start <= done < end)


def lateness(rows: list[JSON], read_at: float) -> JSON:
    """Each due tick's start after its due time, in seconds; one not started yet: its wait so far."""
    late: list[float] = []
    done_late: list[float] = []
    waiting = 0
    for row in rows:
        due = epoch(row["scheduled_start_at"])
        assert due is not None
        started, completed = epoch(row.get("running_at")), epoch(row.get("completed_at"))
        if started is None:
            waiting += 1
        late.append(max(0.0, (started if started is not None else read_at) - due))
        done_late.append(max(0.0, (completed if completed is not None else read_at) - due))
    return {
        "due": len(rows),
        "not_started": waiting,
        "late_p50_s": round(percentile(late, 50), 3),
        "late_p99_s": round(percentile(late, 99), 3),
        "late_max_s": round(max(late), 3) if late else None,
        "done_p99_s": round(percentile(done_late, 99), 3),
        "over_1s": sum(1 for x in late if x > ON_TIME_P99_S),
    }


async def timed_get(client: httpx.AsyncClient, url: str) -> tuple[float, int]:
    started = time.monotonic()
    response = await client.get(url)
    took = time.monotonic() - started
    checked(response, url)
    return took, len(response.content)


def cli_ms(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "replenisher.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        timeout=300,
        check=False,
    )
    took = (time.monotonic() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"replenisher {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-300:]}")
    return took, len(done.stdout)


def timings(values: list[float]) -> JSON:
    return {"first_ms": round(values[0], 1), "median_ms": round(statistics.median(values), 1), "tries": len(values)}


class TimedCalls:
    """An object whose coroutine methods are timed, each adding its milliseconds to `times` by name."""

    def __init__(self, inner: object, times: dict[str, float]) -> None:
        self._inner = inner
        self._times = times

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return await attr(*args, **kwargs)
            finally:
                self._times[name] = self._times.get(name, 0.0) + (time.monotonic() - started) * 1000

        return timed


async def rows_breakdown(stack: OwnStack) -> JSON:
    """Where the list views' time goes, read in this process the way the console reads its /skus: the
    ERP's item master, each of `sku_rows`' reads of Restate (and of those, the SQL queries' own time),
    the rows built, then the first page chosen (`page_of`: every row filtered, sorted, chips counted)
    and rendered to HTML."""
    calls: dict[str, float] = {}
    sql: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=600) as http:
        client = RestateClient(stack.restate.ingress_url, stack.restate.admin_url, http)
        client.http = cast(RestateHttp, TimedCalls(client.http, sql))
        started = time.monotonic()
        catalogue = await ErpCatalogue(stack.world.url, http).read()
        erp_ms = (time.monotonic() - started) * 1000
        started = time.monotonic()
        rows = await sku_rows(cast(RestateClient, TimedCalls(client, calls)), catalogue)
        rows_ms = (time.monotonic() - started) * 1000
        now, query = time.time(), SkuQuery()
        started = time.monotonic()
        page = page_of(rows, query, None, now)
        page_ms = (time.monotonic() - started) * 1000
        started = time.monotonic()
        html = pages.skus(page, query, now, None, catalogue)
        render_ms = (time.monotonic() - started) * 1000
    reads = sum(calls.values())
    return {
        "rows": len(rows),
        "erp_items_ms": round(erp_ms, 1),
        "restate_reads_ms": {name: round(ms, 1) for name, ms in calls.items()},
        "restate_sql_ms": round(sql.get("sql", 0.0), 1),
        "rows_built_ms": round(rows_ms - reads, 1),
        "page_of_ms": round(page_ms, 1),
        "render_ms": round(render_ms, 1),
        "html_bytes": len(html.encode()),
    }


async def list_breakdown(stack: OwnStack) -> JSON:
    """Where the console's /skus time goes now that it reads the SKU list (`operations.sku_page`), each
    read on its own in this process: the check whether the service is down (every console page makes
    it), the scan for paused calls (the console makes it at most every 30 s), the paused calls read by
    id with the runs retrying a step, the list's first page (every shard at once, by key), the ERP's
    figures for its SKUs, and the whole page built as the console builds it, and with the scan."""
    async with httpx.AsyncClient(timeout=600) as http:
        client = RestateClient(stack.restate.ingress_url, stack.restate.admin_url, http)
        erp = ErpCatalogue(stack.world.url, http)
        parts: JSON = {}

        async def timed(name: str, read: Awaitable[Any]) -> Any:
            started = time.monotonic()
            value = await read
            parts[name] = round((time.monotonic() - started) * 1000, 1)
            return value

        await timed("health_ms", client.health())
        await timed("paused_scan_ms", paused_ids(client.http))
        recent = RecentPaused(fresh_s=3600.0)
        await recent.ids(client.http)
        await timed("paused_by_id_and_retrying_ms", client.troubled(recent))
        query = ShardQuery(now=time.time(), upto=0)
        first = await timed("list_page_ms", read_list(client, query, 0, SkuQuery().per_page))
        await timed("erp_page_ms", erp.read_page([e.sku for e in first.entries]))
        await timed("whole_page_ms", listed_page(client, SkuQuery(), None, time.time(), erp, recent))
        await timed("whole_page_scanning_ms", listed_page(client, SkuQuery(), None, time.time(), erp))
        await recent.aclose()
        return parts | {"rows": len(first.entries), "total": first.total, "filled": first.filled}


async def list_views(stack: OwnStack, base: Path, say: Say) -> JSON:
    """The console's /skus and `replenisher skus`, first page each, over the running stack."""
    env = {
        "REPLENISHER_INGRESS_URL": stack.restate.ingress_url,
        "REPLENISHER_ADMIN_URL": stack.restate.admin_url,
        "REPLENISHER_WORLD_URL": stack.world.url,
    }
    console = HypercornApp(CONSOLE_APP, free_port(), env, name="console", log_path=base / "console.log")
    try:
        console.start()
        console.wait_ready()
        times, size = [], 0
        async with httpx.AsyncClient(timeout=300) as client:
            for _ in range(LIST_TRIES):
                took, size = await timed_get(client, f"{console.url}/skus")
                times.append(took * 1000)
        page = timings(times) | {"bytes": size}
        say(f"  console /skus: {page['median_ms']:.0f} ms (first {page['first_ms']:.0f} ms), {size / 1024:.0f} KB")
    finally:
        console.stop()
    runs = [cli_ms(["skus"], env) for _ in range(LIST_TRIES)]
    start_ms = [cli_ms(["--help"], env)[0] for _ in range(LIST_TRIES)]
    # By outcome: the list orders by any key at the same cost (before the list, every agent's record was read).
    every_ms = [cli_ms(["skus", "--sort", "outcome"], env)[0] for _ in range(LIST_TRIES)]
    cli = timings([t for t, _ in runs]) | {
        "bytes": runs[-1][1],
        "interpreter_and_import_ms": timings(start_ms),
        "by_outcome_every_agent_read": timings(every_ms),
    }
    say(
        f"  replenisher skus: {cli['median_ms']:.0f} ms (of which {statistics.median(start_ms):.0f} ms starting up); "
        f"--sort outcome, every agent read: {statistics.median(every_ms):.0f} ms"
    )
    listed = await list_breakdown(stack)
    say(f"  where the console's /skus time goes (read in this process): {listed}")
    parts = await rows_breakdown(stack)
    say(f"  the page from every agent's record instead (as with the service down): {parts}")
    return {"console_skus": page, "cli_skus": cli, "list_breakdown": listed, "breakdown": parts}


def worker_spread(before: dict[int, float], after: dict[int, float], connections: dict[int, int]) -> list[JSON]:
    """The service's processes busiest first, each with its CPU seconds in the window and the
    connections from Restate it held at the end: whether the calls reached every worker."""
    rows = [
        {"pid": pid, "cpu_s": round(after[pid] - before.get(pid, 0.0), 3), "connections": connections.get(pid, 0)}
        for pid in after
    ]
    return sorted(rows, key=lambda row: -row["cpu_s"])


async def run_size(size: int, plan: ScalePlan, workdir: Path, say: Say, workers: int = 1) -> JSON:
    day = plan.day_of(size)
    say(f"N={size}, {workers} service worker(s): a stack with a {day:g} s day, {size / day:.1f} ticks/s expected")
    base = workdir / f"n{size}-w{workers}"
    base.mkdir(parents=True)
    calendar = base / "calendar.txt"
    calendar.write_text(SEVEN_DAYS)
    stack = start_own_stack(
        base,
        day,
        service_env={"REPLENISHER_CALENDAR_FILE": str(calendar)},
        world_env={"WORLD_CALENDAR_FILE": str(calendar)},
        service_workers=workers,
    )
    try:
        return await measure_size(stack, size, day, plan, base, say) | {
            "service_workers": workers,
            "restate_env": restate_env_for_workers(workers),
        }
    finally:
        stack.stop()


async def measure_size(stack: OwnStack, size: int, day: float, plan: ScalePlan, base: Path, say: Say) -> JSON:
    procs = Processes(stack)
    data = base / "restate-data"
    skus = [sku_name(i) for i in range(size)]
    limits = httpx.Limits(max_connections=plan.watch_concurrency)
    admin = RestateHttp(stack.restate.ingress_url, stack.restate.admin_url, httpx.AsyncClient(timeout=600))
    async with (
        httpx.AsyncClient(base_url=stack.world.url, timeout=120, limits=limits) as world,
        httpx.AsyncClient(base_url=stack.restate.ingress_url, timeout=120, limits=limits) as ingress,
    ):
        cpu0, t0 = procs.cpu(), time.monotonic()
        await asyncio.sleep(IDLE_SECONDS)
        idle_s = time.monotonic() - t0
        idle_per_s = {role: v / idle_s for role, v in cpu_delta(cpu0, procs.cpu()).items()}
        disk_empty, held_empty = dir_mb(data), dir_mb(data, apparent=True)
        await set_up_world(world, skus, plan.watch_concurrency)
        say(f"  the world stocks {size} SKUs; watching them, {plan.watch_concurrency} at a time")
        watch_s = await watch_all(ingress, skus, plan.watch_concurrency, say)
        say(f"  {size} under watch in {watch_s:.1f} s: {size / watch_s:.0f}/s")

        await asyncio.sleep(SETTLE_DAYS * day)
        window_s = plan.days * day
        say(f"  measuring {plan.days:g} business days ({window_s:.0f} s)")
        start_wall, cpu_start, start_mono = time.time(), procs.cpu(), time.monotonic()
        service_start = procs.service_cpu()
        await asyncio.sleep(window_s)
        end_wall, cpu_end, end_mono = time.time(), procs.cpu(), time.monotonic()
        service_end = procs.service_cpu()
        spread = worker_spread(service_start, service_end, connections_by_pid(list(service_end), stack.service.port))
        memory = procs.memory()
        disk, held = dir_mb(data), dir_mb(data, apparent=True)

        rows = await admin.sql(TICKS)
        read_at = time.time()
        late = lateness(due_between(rows, start_wall, end_wall), read_at)
        ticks = completed_between(rows, start_wall, end_wall)
        await admin.aclose()
        views = await list_views(stack, base, say)

    seconds = end_mono - start_mono
    used = cpu_delta(cpu_start, cpu_end)
    net = {role: used[role] - idle_per_s[role] * seconds for role in used}
    per_tick = {role: round(v * 1000 / ticks, 3) if ticks else None for role, v in net.items()}
    total = round(sum(v for v in per_tick.values() if v is not None), 3) if ticks else None
    result: JSON = {
        "skus": size,
        "day_seconds": day,
        "days_measured": plan.days,
        "window_s": round(seconds, 1),
        "ticks": ticks,
        "ticks_per_s": round(ticks / seconds, 2),
        "expected_ticks": round(size * plan.days),
        "watch": {
            "seconds": round(watch_s, 2),
            "per_s": round(size / watch_s, 1),
            "concurrency": plan.watch_concurrency,
        },
        "lateness": late,
        "on_time": late["done_p99_s"] <= ON_TIME_P99_S and late["due"] > 0,
        "cpu_s": {role: round(v, 3) for role, v in used.items()},
        "idle_cpu_ms_per_s": {role: round(v * 1000, 2) for role, v in idle_per_s.items()},
        "cpu_ms_per_tick": per_tick,
        "cpu_ms_per_tick_total": total,
        "cpu_cores_busy": {role: round(v / seconds, 3) for role, v in used.items()},
        "service_processes": spread,
        "memory_mb": {role: {k: round(v, 1) for k, v in m.items()} for role, m in memory.items()},
        "disk": {
            "allocated_empty_mb": round(disk_empty, 2),
            "allocated_end_mb": round(disk, 2),
            "empty_mb": round(held_empty, 2),
            "end_mb": round(held, 2),
            "kb_per_sku": round((held - held_empty) * 1024 / size, 2),
        },
        "lists": views,
    }
    say(
        f"  N={size}: {ticks} ticks ({result['ticks_per_s']}/s), started late p50 {late['late_p50_s']} s p99 "
        f"{late['late_p99_s']} s, done p99 {late['done_p99_s']} s after due, {total} ms of CPU per tick "
        f"({per_tick}), engine "
        f"{memory['engine']['pss_mb']:.0f} MB, disk {result['disk']['kb_per_sku']} KB per SKU"
    )
    say(f"  the service's processes, busiest first (CPU s in the window, connections from Restate): {spread}")
    return result


def closing_line(result: JSON) -> str:
    return (
        f"scale: skus={result['skus']} ticks={result['ticks']} late_p99_s={result['lateness']['done_p99_s']:g} "
        f"cpu_ms_per_tick={result['cpu_ms_per_tick_total']:g} engine_mb={result['memory_mb']['engine']['pss_mb']:g} "
        f"skus_page_ms={result['lists']['console_skus']['median_ms']:g}"
    )


def summary_lines(results: JSON) -> list[str]:
    lines = []
    for r in results["runs"]:
        views = r["lists"]
        lines.append(
            f"N={r['skus']}, {r.get('service_workers', 1)} service worker(s): watch {r['watch']['per_s']}/s; "
            f"{r['ticks']} ticks at {r['ticks_per_s']}/s "
            f"({r['day_seconds']:g} s days), started p99 {r['lateness']['late_p99_s']} s and done p99 "
            f"{r['lateness']['done_p99_s']} s after due ({'on time' if r['on_time'] else 'LATE'}); "
            f"CPU per tick {r['cpu_ms_per_tick_total']} ms "
            f"{r['cpu_ms_per_tick']}; engine {r['memory_mb']['engine']['pss_mb']} MB, disk "
            f"{r['disk']['kb_per_sku']} KB/SKU; console /skus {views['console_skus']['median_ms']} ms, "
            f"replenisher skus {views['cli_skus']['median_ms']} ms"
        )
    return lines


def meta(plan: ScalePlan) -> JSON:
    load = os.getloadavg()
    return {
        "plan": plan.model_dump(),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "python": platform.python_version(),
        "server": service_server(),
        "load_avg_1m_at_start": round(load[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", choices=sorted(PLANS), default="full")
    parser.add_argument("--sizes", type=int, nargs="+", metavar="N", help="these sizes instead of the plan's")
    parser.add_argument("--out", type=Path, help="the results' json (default bench/results/scale-<plan>.json)")
    parser.add_argument(
        "--service-workers",
        type=int,
        nargs="+",
        metavar="W",
        help="the service's worker processes, a run of each size per W in turn (e.g. 1 2 1 2: alternated); "
        "default $REPLENISHER_SERVICE_WORKERS, else 1",
    )
    parser.add_argument("--day-seconds", type=float, metavar="S", help="every size's compressed day, not the plan's")
    parser.add_argument("--days", type=float, metavar="D", help="business days measured, not the plan's")
    args = parser.parse_args(argv)
    try:
        rounds = [service_workers({variable("service_workers"): str(w)}) for w in args.service_workers or []]
        rounds = rounds or [service_workers()]
    except ValueError as e:
        parser.error(str(e))
    plan = PLANS[args.plan]
    if args.service_workers:
        plan = plan.model_copy(update={"name": f"{plan.name}-w{'-'.join(map(str, args.service_workers))}"})
    if args.sizes:
        if any(n < 1 for n in args.sizes):
            parser.error("--sizes takes sizes of at least 1")
        plan = plan.model_copy(update={"name": f"{plan.name}-n{'-'.join(map(str, args.sizes))}", "sizes": args.sizes})
    if args.day_seconds is not None or args.days is not None:
        if (args.day_seconds is not None and args.day_seconds <= 0) or (args.days is not None and args.days <= 0):
            parser.error("--day-seconds and --days take positive numbers")
        days = args.days if args.days is not None else plan.days
        day = {n: args.day_seconds for n in plan.sizes} if args.day_seconds is not None else plan.day_seconds
        plan = plan.model_copy(update={"days": days, "day_seconds": day})
    out = args.out or RESULTS / f"scale-{plan.name}.json"
    results: JSON = {"meta": meta(plan), "runs": []}
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-scale-"))
    try:
        for size in plan.sizes:
            for turn, workers in enumerate(rounds):
                load_before = os.getloadavg()[0]
                run = asyncio.run(run_size(size, plan, workdir / f"round{turn}", say, workers))
                run["load_avg_1m"] = {"at_start": round(load_before, 2), "at_end": round(os.getloadavg()[0], 2)}
                results["runs"].append(run)
                results["meta"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(results, indent=1) + "\n")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    say(f"results: {out}")
    for line in summary_lines(results):
        print(line)
    print(closing_line(results["runs"][-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
