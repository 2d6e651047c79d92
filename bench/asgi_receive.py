"""`python -m bench.asgi_receive`: what a server costs per frame of a streamed HTTP/2 request body.

A minimal reproduction of where our cold wake's CPU goes (issue 33, item 2), with nothing of
ours in it: a cold wake is Restate streaming a run's journal back to the service, one small
HTTP/2 DATA frame per entry, and each arrives in the app as one ASGI `receive`. Here an ASGI app
that only drains the body (`bench/receive_app.py`) runs under granian and under hypercorn with
the flags the service runs with (`replenisher.stack.processes.server_argv`), and a bare HTTP/2
client (`bench/h2_client.py`, h2c as Restate speaks it) sends it bodies of the same size three
ways, one request at a time:

- `one`: the body in one DATA frame;
- `together`: the body in `--frames` frames of `--frame-bytes` (a journal of that many entries),
  written to the socket at once, so the server has them all in hand (a replay: the journal is
  there to send);
- `apart`: the same frames, one write each.

Per request it reads the server's CPU (its whole process group, granian's supervisor and
worker both, less its idle rate), its threads' context switches, and the `receive` calls the
app made. What one more frame costs the server is the difference over the frames added, from
`one` to `together`: a server that handed over the frames it holds in one `receive` would cost
about `one`. The servers take turns for `--rounds` rounds, and the figures are medians. The
last line:

    receive: frames=F frame_bytes=B granian_us_per_frame=G hypercorn_us_per_frame=H frame_cost_ratio=G/Hx \
granian_receives_per_frame=RG hypercorn_receives_per_frame=RH granian_switches_per_frame=SG \
hypercorn_switches_per_frame=SH

A minute or two; not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.h2_client import WINDOW, H2Client
from bench.procfs import group_cpu_seconds, group_switches
from replenisher.stack.ports import LOOPBACK, free_port
from replenisher.stack.processes import SERVERS, AsgiApp, Server
from replenisher.stack.reaper import reap_with_this_process

JSON = dict[str, Any]
APP = "bench.receive_app:app"
SHAPES = ("one", "together", "apart")


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


async def _drain(client: H2Client, frames: int, frame_bytes: int, together: bool = True) -> JSON:
    status, body = await client.post("/drain", [b"x" * frame_bytes] * frames, together)
    if status != 200:
        raise RuntimeError(f"POST /drain answered {status}: {body[:200]!r}")
    found: JSON = json.loads(body)
    if found["bytes"] != frames * frame_bytes:
        raise RuntimeError(f"the app read {found['bytes']} bytes of {frames * frame_bytes}")
    return found


async def _idle_rate(pid: int, seconds: float = 1.0) -> float:
    before = group_cpu_seconds(pid)
    await asyncio.sleep(seconds)
    return (group_cpu_seconds(pid) - before) / seconds


@dataclass(frozen=True)
class Side:
    """A server as the service runs it, and any of its settings given by environment on top
    (granian reads `GRANIAN_*`): to try one against the flags we run with."""

    label: str
    server: Server
    env: Mapping[str, str] = field(default_factory=dict)


def sides_of(granian_env: list[str]) -> list[Side]:
    """hypercorn and granian as the service runs them; then granian with each `KEY=VALUE` given."""
    sides = [Side(server, server) for server in SERVERS]
    for setting in granian_env:
        key, sep, value = setting.partition("=")
        if not sep or not key.startswith("GRANIAN_"):
            raise ValueError(f"{setting!r}: a granian setting is GRANIAN_NAME=value")
        sides.append(Side(f"granian+{key.removeprefix('GRANIAN_').lower()}={value}", "granian", {key: value}))
    return sides


async def one_side(side: Side, workdir: Path, frames: int, frame_bytes: int, requests: int, tag: str) -> JSON:
    """One fresh server process: warmed up, then `requests` bodies of each shape, one at a time."""
    name = f"receive-{side.server}-{tag}"
    process = AsgiApp(APP, free_port(), side.env, name=name, log_path=workdir / f"{name}.log", server=side.server)
    process.start()
    try:
        process.wait_ready(60)
        assert process.pid is not None
        out: JSON = {"server": side.label}
        async with H2Client(LOOPBACK, process.port) as client:
            for _ in range(20):
                await _drain(client, frames, frame_bytes)
                await _drain(client, 1, frames * frame_bytes)
            idle = await _idle_rate(process.pid)
            for shape in SHAPES:
                count, size = (1, frames * frame_bytes) if shape == "one" else (frames, frame_bytes)
                receives = 0
                started, switched = time.monotonic(), group_switches(process.pid)
                before = group_cpu_seconds(process.pid)
                for _ in range(requests):
                    receives += (await _drain(client, count, size, shape != "apart"))["receives"]
                elapsed, spent = time.monotonic() - started, group_cpu_seconds(process.pid) - before
                out[f"{shape}_us"] = round(max(spent - idle * elapsed, 0.0) * 1e6 / requests, 1)
                out[f"{shape}_receives"] = receives / requests
                out[f"{shape}_switches"] = (group_switches(process.pid) - switched) / requests
        added = max(frames - 1, 1)
        out["us_per_frame"] = round((out["together_us"] - out["one_us"]) / added, 2)
        out["apart_us_per_frame"] = round((out["apart_us"] - out["one_us"]) / added, 2)
        out["switches_per_frame"] = round((out["together_switches"] - out["one_switches"]) / added, 2)
        out["receives_per_frame"] = round(out["together_receives"] / frames, 3)
        return out
    finally:
        process.stop()


def closing_line(found: dict[str, list[JSON]], frames: int, frame_bytes: int) -> str:
    """Each server's median cost per frame added, granian's as a multiple of hypercorn's, and the
    `receive` calls per frame the app made on each."""

    def med(server: str, key: str) -> float:
        return float(statistics.median(row[key] for row in found[server]))

    g, h = med("granian", "us_per_frame"), med("hypercorn", "us_per_frame")
    ratio = f"{g / h:.2f}x" if h > 0 else "n/a"
    return (
        f"receive: frames={frames} frame_bytes={frame_bytes} granian_us_per_frame={g:.1f} "
        f"hypercorn_us_per_frame={h:.1f} frame_cost_ratio={ratio} "
        f"granian_receives_per_frame={med('granian', 'receives_per_frame'):.2f} "
        f"hypercorn_receives_per_frame={med('hypercorn', 'receives_per_frame'):.2f} "
        f"granian_switches_per_frame={med('granian', 'switches_per_frame'):.1f} "
        f"hypercorn_switches_per_frame={med('hypercorn', 'switches_per_frame'):.1f}"
    )


async def alternate(
    sides: list[Side], rounds: int, frames: int, frame_bytes: int, requests: int, workdir: Path
) -> dict[str, list[JSON]]:
    found: dict[str, list[JSON]] = {side.label: [] for side in sides}
    for i in range(rounds):
        for n, side in enumerate(sides):
            row = await one_side(side, workdir, frames, frame_bytes, requests, f"{n}-{i}")
            say(
                f"round {i + 1} of {rounds}, {side.label}: one frame {row['one_us']:.0f} µs, {frames} frames "
                f"{row['together_us']:.0f} µs written together, {row['apart_us']:.0f} µs apart, of the server's "
                f"CPU per request; {row['us_per_frame']:.1f} µs per frame added ({row['apart_us_per_frame']:.1f} "
                f"apart); {row['together_receives']:.0f} receives for {frames} frames; "
                f"{row['switches_per_frame']:.1f} thread switches per frame added"
            )
            found[side.label].append(row)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.asgi_receive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=60, help="chunks per body (default 60: a 30-step journal)")
    parser.add_argument("--frame-bytes", type=int, default=200, help="bytes per chunk (default 200)")
    parser.add_argument("--requests", type=int, default=300, help="requests of each shape per round (default 300)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server, the servers taking turns")
    parser.add_argument(
        "--granian-env",
        nargs="*",
        default=[],
        metavar="GRANIAN_NAME=value",
        help="also granian with this setting (e.g. GRANIAN_RUNTIME_MODE=mt), one side each, in the rounds' turns",
    )
    options = parser.parse_args(argv)
    if options.frames < 2 or options.frame_bytes < 1 or options.requests < 1 or options.rounds < 1:
        parser.error("--frames must be at least 2, and --frame-bytes, --requests and --rounds at least 1")
    if options.frames * options.frame_bytes >= WINDOW:
        parser.error(f"--frames times --frame-bytes must stay under HTTP/2's initial window, {WINDOW} bytes")
    try:
        sides = sides_of(options.granian_env)
    except ValueError as e:
        parser.error(str(e))
    reap_with_this_process()  # killed mid-run, its servers go with it
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-receive-"))
    try:
        found = asyncio.run(
            alternate(sides, options.rounds, options.frames, options.frame_bytes, options.requests, workdir)
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for side in sides[len(SERVERS) :]:
        rows = found[side.label]
        say(
            f"{side.label}: {statistics.median(r['us_per_frame'] for r in rows):.1f} µs and "
            f"{statistics.median(r['switches_per_frame'] for r in rows):.1f} thread switches per frame added"
        )
    print(closing_line(found, options.frames, options.frame_bytes), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
