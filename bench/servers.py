"""`python -m bench.servers`: the service on each ASGI server it supports, back to back in one run.

Each round starts our whole system afresh (restate-server from the project's `restate.toml`,
the world, the service) with the service on one server, warms it up, and runs full
replenishments at one concurrency, reading the CPU of the service and the engine per
replenishment and the throughput (`bench.scenarios.Driver.throughput`, as the main bench does);
then (`--wakes`, 30 by default) wakes suspended runs of 30 journaled steps one by one, reading
the CPU per cold wake (`Driver.cold_wake`: the engine suspends idle runs after a second there).
The servers take turns (hypercorn, granian, hypercorn, granian, ...) so that a machine whose
load drifts hurts both alike; the figures are the median of each server's rounds, and the last
lines give granian's as a multiple of hypercorn's:

    servers-wake: hypercorn_wake_cpu_ms=H granian_wake_cpu_ms=G wake_cpu_ratio=Rx
    servers: hypercorn_cpu_ms=H granian_cpu_ms=G cpu_ratio=Rx hypercorn_per_s=A granian_per_s=B throughput_ratio=Tx

It is how the default server was chosen (docs/benchmarks.md): a few minutes, not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.ab import WAKE_STEPS, add_round_options, closing_lines, median
from bench.scenarios import Driver
from bench.systems import Ours
from replenisher.stack.processes import SERVER_SETTING, Server

JSON = dict[str, Any]


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


async def one_round(
    server: Server,
    workdir: Path,
    concurrency: int,
    count: int,
    tag: str,
    engine_env: Mapping[str, str] | None = None,
    wakes: int = 0,
    source: Path | None = None,
) -> JSON:
    """One fresh system (new data dir) with the service on `server` and restate-server given
    `engine_env` on top of `restate.toml`: warmed up, then `count` replenishments measured.
    With `wakes`, that many suspended runs of `WAKE_STEPS` journaled steps are then woken one
    by one (the main bench's cold wake): the engine suspends idle runs after a second for it."""
    os.environ[SERVER_SETTING] = server
    system = Ours(
        workdir,
        name=f"servers-{tag}",
        engine_env=engine_env,
        inactivity_timeout="1s" if wakes else None,
        source=source,
    )
    try:
        system.start()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            driver = Driver(system, session, say)
            await driver.throughput(5, 10, "warm")
            await driver.measure_idle(3.0)
            level = await driver.throughput(concurrency, count, "m")
            woken = await driver.cold_wake(WAKE_STEPS, wakes, "ab") if wakes else None
    finally:
        system.stop()
    cpu = level["cpu_ms_per_op"]
    figures = {
        "server": server,
        "service_ms": cpu["service"],
        "engine_ms": cpu["engine"],
        "cpu_ms": round(cpu["service"] + cpu["engine"], 3),
        "per_s": level["per_s"],
        "p50_ms": level["latency"]["p50_ms"],
        # What Restate did for them and kept: which code ran shows here when the sides journal differently.
        "invocations": level.get("invocations_made_per_replenishment"),
        "kept_invocations": level.get("invocations_per_replenishment"),
        "journal_entries": level.get("journal_entries_per_replenishment"),
    }
    if woken is not None:
        wake_cpu = woken["cpu_ms_per_op"]
        figures |= {
            "wake_service_ms": wake_cpu["service"],
            "wake_engine_ms": wake_cpu["engine"],
            "wake_cpu_ms": round(wake_cpu["service"] + wake_cpu["engine"], 3),
        }
    return figures


@dataclass(frozen=True)
class Side:
    """One side of an A/B run: what its rounds are called, its service's server, the
    restate-server settings it is given on top of `restate.toml`, and the checkout whose
    service it runs (None: this one)."""

    label: str
    server: Server
    engine_env: Mapping[str, str] = field(default_factory=dict)
    source: Path | None = None


async def alternate(
    sides: list[Side], rounds: int, concurrency: int, count: int, workdir: Path, wakes: int = 0
) -> dict[str, list[JSON]]:
    """`rounds` rounds of each side, the sides taking turns, so a machine whose load drifts
    hurts each alike: each side's figures, by its label (`one_round`'s, with `wakes` cold
    wakes each round). The server setting is put back after."""
    found: dict[str, list[JSON]] = {side.label: [] for side in sides}
    before = os.environ.get(SERVER_SETTING)
    try:
        for i in range(rounds):
            for n, side in enumerate(sides):
                say(f"round {i + 1} of {rounds}: {side.label}, {count} replenishments at concurrency {concurrency}")
                figures = await one_round(
                    side.server, workdir, concurrency, count, f"{n}-{i}", side.engine_env, wakes, side.source
                )
                say(
                    f"  {side.label}: service {figures['service_ms']:.1f} ms + engine {figures['engine_ms']:.1f} ms "
                    f"of CPU per replenishment, {figures['per_s']}/s, p50 {figures['p50_ms']:.0f} ms; "
                    f"per replenishment {figures['invocations']} invocations made; kept "
                    f"{figures['kept_invocations']} invocations, {figures['journal_entries']} journal entries"
                )
                if wakes:
                    say(
                        f"  {side.label}: service {figures['wake_service_ms']:.1f} ms + engine "
                        f"{figures['wake_engine_ms']:.1f} ms of CPU per cold wake after {WAKE_STEPS} steps"
                    )
                found[side.label].append(figures)
    finally:
        if before is None:
            os.environ.pop(SERVER_SETTING, None)
        else:
            os.environ[SERVER_SETTING] = before
    return found


def say_medians(found: dict[str, list[JSON]]) -> None:
    for side, rows in found.items():
        say(
            f"{side}: median service {median(rows, 'service_ms'):.1f} ms + engine {median(rows, 'engine_ms'):.1f} ms "
            f"per replenishment, {median(rows, 'per_s'):.2f}/s over {len(rows)} rounds"
        )
        if rows and "wake_cpu_ms" in rows[0]:
            say(
                f"{side}: median service {median(rows, 'wake_service_ms'):.1f} ms + engine "
                f"{median(rows, 'wake_engine_ms'):.1f} ms per cold wake after {WAKE_STEPS} steps"
            )


async def compare(rounds: int, concurrency: int, count: int, workdir: Path, wakes: int = 0) -> dict[str, list[JSON]]:
    order: list[Server] = ["hypercorn", "granian"]
    return await alternate([Side(server, server) for server in order], rounds, concurrency, count, workdir, wakes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.servers", description=__doc__.split("\n\n")[0])
    add_round_options(parser, rounds=2)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-servers-"))
    try:
        found = asyncio.run(compare(args.rounds, args.concurrency, args.count, workdir, args.wakes))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    h, g = found["hypercorn"], found["granian"]
    say_medians(found)
    closing_lines("servers", ("hypercorn", h), ("granian", g), over="granian")
    return 0


if __name__ == "__main__":
    sys.exit(main())
