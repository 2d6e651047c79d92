"""`python -m bench.asgi_receive` (bench/asgi_receive.py), the minimal reproduction of what a
server costs per chunk of a streamed request body: a short run on real hypercorn and granian,
its closing line's arithmetic, and the settings it refuses. No figure is judged: a bench
measures, a test checks that it does."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench.asgi_receive import Side, closing_line, sides_of

from bench_logic.smoke import run_bench
from replenisher.stack.processes import group_members
from support import REPO_ROOT

CLOSING_LINE = re.compile(
    r"^receive: frames=5 frame_bytes=64 granian_us_per_frame=-?[0-9.]+ hypercorn_us_per_frame=-?[0-9.]+ "
    r"frame_cost_ratio=(?:-?[0-9.]+x|n/a) granian_receives_per_frame=([0-9.]+) "
    r"hypercorn_receives_per_frame=([0-9.]+) granian_switches_per_frame=-?[0-9.]+ "
    r"hypercorn_switches_per_frame=-?[0-9.]+$"
)


@pytest.mark.slow
def test_a_short_run_drains_every_body_on_both_servers_and_ends_with_its_line() -> None:
    options = ["--rounds", "1", "--requests", "3", "--frames", "5", "--frame-bytes", "64"]
    lines = run_bench("bench.asgi_receive", *options, "--granian-env", "GRANIAN_RUNTIME_MODE=mt", timeout=180)
    found = CLOSING_LINE.match(lines[-1])
    assert found, lines
    # Every chunk reached the app as a receive of its own on both servers (the last one can come
    # with an empty closing frame of its own): the app counted them, and checked every byte came.
    assert all(1.0 <= float(found.group(n)) <= 1.5 for n in (1, 2)), lines[-1]
    assert any(
        line.endswith("thread switches per frame added") and "granian+runtime_mode=mt:" in line for line in lines
    )


def row(us: float, receives: float, switches: float) -> dict[str, float]:
    return {"us_per_frame": us, "receives_per_frame": receives, "switches_per_frame": switches}


def test_the_closing_line_gives_medians_and_granians_cost_as_a_multiple_of_hypercorns() -> None:
    found = {
        "granian": [row(40.0, 1.0, 8.0), row(50.0, 1.0, 9.0), row(45.0, 1.0, 8.5)],
        "hypercorn": [row(30.0, 1.0, 0.5), row(20.0, 1.0, 0.25), row(25.0, 1.0, 0.25)],
    }
    assert closing_line(found, 60, 200) == (
        "receive: frames=60 frame_bytes=200 granian_us_per_frame=45.0 hypercorn_us_per_frame=25.0 "
        "frame_cost_ratio=1.80x granian_receives_per_frame=1.00 hypercorn_receives_per_frame=1.00 "
        "granian_switches_per_frame=8.5 hypercorn_switches_per_frame=0.2"
    )


def test_a_granian_setting_is_a_side_of_its_own_and_anything_else_is_refused() -> None:
    sides = sides_of(["GRANIAN_RUNTIME_MODE=mt"])
    assert sides == [
        Side("hypercorn", "hypercorn"),
        Side("granian", "granian"),
        Side("granian+runtime_mode=mt", "granian", {"GRANIAN_RUNTIME_MODE": "mt"}),
    ]
    for bad in ("RUNTIME_MODE=mt", "GRANIAN_RUNTIME_MODE"):
        with pytest.raises(ValueError, match="GRANIAN_NAME=value"):
            sides_of([bad])


def test_a_body_over_http2s_first_window_is_refused_before_any_server_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.asgi_receive import main

    with pytest.raises(SystemExit) as exit_:
        main(["--frames", "400", "--frame-bytes", "200"])
    assert exit_.value.code == 2
    assert "under HTTP/2's initial window, 65535 bytes" in capsys.readouterr().err


def children(pid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(entry.path, "stat").read_text()
                if int(stat.rsplit(")", 1)[-1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def cmdline(pid: int) -> bytes:
    """The process's command line, or nothing once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
def test_a_run_killed_midway_takes_its_servers_with_it() -> None:
    """A bench killed without a chance to stop anything (SIGKILL) leaves no server running: each
    server leads a session of its own, so only the reaper it opted into can stop them."""
    options = ["--rounds", "50", "--requests", "100000", "--frames", "5", "--frame-bytes", "64"]
    run = subprocess.Popen(
        [sys.executable, "-m", "bench.asgi_receive", *options],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not servers and time.monotonic() < deadline and run.poll() is None:
            servers = [pid for pid in children(run.pid) if b"bench.receive_app" in cmdline(pid)]
            time.sleep(0.05)
        assert servers, "the bench started no server within 60 s"
        os.kill(run.pid, signal.SIGKILL)
        run.wait(10)
        deadline = time.monotonic() + 30
        while any(group_members(pid) for pid in servers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in servers if group_members(pid)], "servers outlived the killed bench"
    finally:
        for pgid in [run.pid, *servers]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        run.wait(10)
