"""Where our service's CPU goes during full replenishments: py-spy samples, summed by module;
and where the engine's goes, from `perf` samples of restate-server (`bench.engine_profile`).

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

from bench.engine_profile import EngineSampler, unavailable
from bench.scenarios import Driver
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
        await driver.wait_bench_ready(ids)
        await asyncio.sleep(2.5)  # past the inactivity timeout: every run suspended
        engine, why = await _engine_sampler(system, "perf-wake.data", say)
        sampler = await _sampled(system.service.pid, raw, rate=1000)
        woke = await driver.wake(ids)
        await _stop(sampler, raw)
        engine_summary = await engine.stop() if engine else {"unavailable": why}
    summary = summarise(raw)
    summary["cpu_ms_per_wake"] = woke["cpu_ms_per_op"]
    summary["engine"] = engine_summary
    _say_shares(say, summary, engine_summary)
    return summary


async def _profile(system: Ours, say: Callable[[str], None], concurrency: int, count: int) -> dict[str, Any]:
    assert system.service is not None and system.service.pid is not None
    raw = system.workdir / "py-spy.txt"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        driver = Driver(system, session, say)
        await driver.throughput(5, 10, "warm")
        engine, why = await _engine_sampler(system, "perf.data", say)
        sampler = await _sampled(system.service.pid, raw)
        level = await driver.throughput(concurrency, count, "prof")
        await _stop(sampler, raw)
        engine_summary = await engine.stop() if engine else {"unavailable": why}
    summary = summarise(raw)
    summary["throughput_while_sampled"] = level["per_s"]
    summary["cpu_ms_per_replenishment"] = level["cpu_ms_per_op"]
    summary["engine"] = engine_summary
    _say_shares(say, summary, engine_summary)
    return summary


async def _engine_sampler(
    system: Ours, name: str, say: Callable[[str], None]
) -> tuple[EngineSampler | None, str | None]:
    """`perf` started on restate-server, or None and why it cannot sample here."""
    why = await asyncio.to_thread(unavailable)
    if why is None and system.restate.pid is None:
        why = "restate-server has no pid"
    if why is not None:
        say(f"  the engine is not sampled: {why}")
        return None, why
    sampler = EngineSampler(system.restate.pid, system.workdir / name)
    await sampler.start()
    return sampler, None


def _say_shares(say: Callable[[str], None], service: dict[str, Any], engine: dict[str, Any]) -> None:
    for group, share in service["share"].items():
        say(f"  service {share * 100:5.1f}%  {group}")
    for group, share in (engine.get("share") or {}).items():
        say(f"  engine  {share * 100:5.1f}%  {group}")
