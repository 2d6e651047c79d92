"""Where our service's CPU goes during full replenishments: py-spy samples, summed by module,
and `perf` samples of the same process, summed by library and kernel work
(`bench.service_profile`); and where the engine's goes, from `perf` samples of restate-server
(`bench.engine_profile`).

A separate pass (the samplers cost CPU of their own, so they never run during a measured one):
a fresh stack, a burst of replenishments at concurrency 50, the service and the engine sampled
throughout.
The share in the adapters (httpx and `replenisher.adapters`) is the issue's question of how
much of a replenishment's CPU the outside calls cost us.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.engine_profile import PerfSampler, unavailable
from bench.scenarios import Deadline, Driver
from bench.service_profile import summarise_report as summarise_native
from bench.systems import Ours

GROUPS = [
    (
        "adapters (httpx, httpcore, h11, anyio, replenisher.adapters)",
        ("httpx/", "httpcore/", "h11/", "anyio/", "replenisher/adapters/"),
    ),
    ("Restate SDK (restate, its VM)", ("restate/",)),
    ("hypercorn and HTTP/2 (h2, hpack, hyperframe)", ("hypercorn/", "h2/", "hpack/", "hyperframe/")),
    ("granian (its Python side; its Rust HTTP/2 is not sampled)", ("granian/",)),
    ("pydantic", ("pydantic/", "pydantic_core/")),
    ("domain (rules, policy, tools)", ("replenisher/domain/",)),
    ("durable glue (replenisher.durable)", ("replenisher/durable/",)),
]
OTHER = "asyncio loop and the rest of the standard library"
# Threads parked waiting for work: sampled, but not CPU.
IDLE_LEAVES = ("_worker (concurrent/futures/thread.py:81)", "EpollSelector.select (selectors.py:468)")


def frame_file(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)".
    return frame[frame.rfind("(") + 1 :] if "(" in frame else frame


def group_of(path: str) -> str | None:
    for group, markers in GROUPS:
        if any(path.startswith(m) or f"/{m}" in path for m in markers):
            return group
    return None


def summarise(raw: Path, top: int = 15) -> dict[str, Any]:
    """Each sample goes to the innermost layer of ours or a library it was in (the standard
    library's work, a socket write say, counts for the layer that asked for it), so the shares
    add up to 100% and "adapters" means what a replenishment's outside calls cost the service."""
    total = 0
    shares: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        if frames[-1] in IDLE_LEAVES:
            continue
        count = int(count_text)
        total += count
        owner = next((g for g in map(group_of, map(frame_file, reversed(frames))) if g), OTHER)
        shares[owner] += count
        leaves[frames[-1]] += count
    groups = [g for g, _ in GROUPS] + [OTHER]
    return {
        "samples": total,
        "share": {g: round(shares[g] / total, 3) for g in groups} if total else {},
        "top_self": [{"frame": f, "share": round(c / total, 3)} for f, c in leaves.most_common(top)] if total else [],
    }


def profile_ours(workdir: Path, say: Callable[[str], None], concurrency: int = 50, count: int = 150) -> dict[str, Any]:
    system = Ours(workdir, name="restate-profile")
    say("profile: our service under py-spy during a throughput run")
    try:
        system.start()
        summary = asyncio.run(_profile(system, say, concurrency, count))
    finally:
        system.stop()
    suspending = Ours(workdir, inactivity_timeout="1s", name="restate-profile-wake")
    say("profile: our service under py-spy while suspended runs (K=30) are woken one by one")
    try:
        suspending.start()
        summary["wake"] = asyncio.run(_profile_wake(suspending, say))
    finally:
        suspending.stop()
    return summary


def python_pid(pid: int) -> int:
    """The process that runs the app: hypercorn's own, or granian's worker under its supervisor."""
    import psutil

    children = psutil.Process(pid).children(recursive=True)
    return children[0].pid if children else pid


async def _sampled(pid: int, raw: Path, rate: int = 200) -> asyncio.subprocess.Process:
    pid = python_pid(pid)
    sampler = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "py-spy"),
        "record",
        "--pid",
        str(pid),
        "--format",
        "raw",
        "--output",
        str(raw),
        "--rate",
        str(rate),
        "--nonblocking",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    await asyncio.sleep(1.0)  # let py-spy attach
    return sampler


async def _stop(sampler: asyncio.subprocess.Process, raw: Path) -> None:
    sampler.send_signal(2)  # SIGINT: py-spy writes what it has and exits
    _, err = await asyncio.wait_for(sampler.communicate(), 30)
    if not await asyncio.to_thread(raw.exists):
        raise RuntimeError(f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}")


async def _profile_wake(system: Ours, say: Callable[[str], None], runs: int = 150, steps: int = 30) -> dict[str, Any]:
    assert system.service is not None and system.service.pid is not None
    raw = system.workdir / "py-spy-wake.txt"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        driver = Driver(system, session, say)
        ids = await driver.start_bench_runs(steps, runs, "prof")
        await driver.wait_bench_ready(ids, Deadline(runs, steps * runs))
        await asyncio.sleep(2.5)  # past the inactivity timeout: every run suspended
        perf = await _perf_samplers(system, "wake", say)
        sampler = await _sampled(system.service.pid, raw, rate=1000)
        woke = await driver.wake(ids)
        await _stop(sampler, raw)
        engine_summary, native_summary = await perf.stop()
    summary = summarise(raw)
    summary["cpu_ms_per_wake"] = woke["cpu_ms_per_op"]
    summary["engine"] = engine_summary
    summary["native"] = native_summary
    _say_shares(say, summary, engine_summary)
    return summary


async def _profile(system: Ours, say: Callable[[str], None], concurrency: int, count: int) -> dict[str, Any]:
    assert system.service is not None and system.service.pid is not None
    raw = system.workdir / "py-spy.txt"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        driver = Driver(system, session, say)
        await driver.throughput(5, 10, "warm")
        perf = await _perf_samplers(system, "replenishing", say)
        sampler = await _sampled(system.service.pid, raw)
        level = await driver.throughput(concurrency, count, "prof")
        await _stop(sampler, raw)
        engine_summary, native_summary = await perf.stop()
    summary = summarise(raw)
    summary["throughput_while_sampled"] = level["per_s"]
    summary["cpu_ms_per_replenishment"] = level["cpu_ms_per_op"]
    summary["engine"] = engine_summary
    summary["native"] = native_summary
    _say_shares(say, summary, engine_summary)
    return summary


class PerfPair:
    """`perf` on restate-server and on the service's Python process, or why it cannot sample here."""

    def __init__(self, engine: PerfSampler | None, service: PerfSampler | None, why: str | None) -> None:
        self.engine, self.service, self.why = engine, service, why

    async def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The engine's summary and the service's native one, each as `{"unavailable": why}` if not sampled."""
        missing = {"unavailable": self.why}
        engine = await self.engine.stop() if self.engine else missing
        service = await self.service.stop() if self.service else missing
        return engine, service


async def _perf_samplers(system: Ours, tag: str, say: Callable[[str], None]) -> PerfPair:
    """`perf` started on restate-server and on the service's Python process (both, or neither)."""
    why = await asyncio.to_thread(unavailable)
    if why is None and (system.restate.pid is None or system.service is None or system.service.pid is None):
        why = "restate-server or the service has no pid"
    if why is not None:
        say(f"  the engine and the service are not sampled by perf: {why}")
        return PerfPair(None, None, why)
    assert system.restate.pid is not None and system.service is not None and system.service.pid is not None
    engine = PerfSampler(system.restate.pid, system.workdir / f"perf-engine-{tag}.data")
    service = PerfSampler(
        python_pid(system.service.pid),
        system.workdir / f"perf-service-{tag}.data",
        fields="overhead,dso,sym",
        summarise=summarise_native,
    )
    await engine.start()
    await service.start()
    return PerfPair(engine, service, None)


def _say_shares(say: Callable[[str], None], service: dict[str, Any], engine: dict[str, Any]) -> None:
    for group, share in service["share"].items():
        say(f"  service {share * 100:5.1f}%  {group}")
    for group, share in (service.get("native", {}).get("share") or {}).items():
        say(f"  service {share * 100:5.1f}%  {group} (perf)")
    for group, share in (engine.get("share") or {}).items():
        say(f"  engine  {share * 100:5.1f}%  {group}")
