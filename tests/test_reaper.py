"""A process that opted in has the process groups it started killed when it dies without stopping
them (a pytest session killed before its teardown); one that did not leaves them running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from replenisher.stack.processes import group_members, pid_alive

# Starts a sleeper before opting in and one after, then says their pids and its watcher's.
OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from replenisher.stack import reaper
    from replenisher.stack.processes import ManagedProcess

    def sleeper(name):
        process = ManagedProcess(
            name, [sys.executable, "-c", "import time; time.sleep(120)"], log_path=Path(sys.argv[1])
        )
        process.start()
        return process

    before = sleeper("before-opting-in")
    reaper.reap_with_this_process()
    after = sleeper("after-opting-in")
    stopped = sleeper("stopped")
    stopped.stop()
    print(before.pid, after.pid, reaper.watcher_pid(), flush=True)
    if sys.argv[2] == "stop":
        after.stop()
        before.stop()
    else:
        time.sleep(120)
    """
)


Owner = tuple[subprocess.Popen[str], list[int]]
StartOwner = Callable[[str], Owner]


def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.02)


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[StartOwner]:
    """Starts an owner process; it and its sleepers are killed afterwards whatever the test saw."""
    started: list[Owner] = []

    def start(mode: str) -> Owner:
        process = subprocess.Popen(
            [sys.executable, "-c", OWNER, str(tmp_path / "sleepers.log"), mode],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 3, f"the owner said {line!r}"
        started.append((process, pids))
        return process, pids

    yield start
    for process, pids in started:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(10)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def test_the_groups_started_after_opting_in_die_with_their_owner_and_the_others_do_not(owner: StartOwner) -> None:
    process, (before, after, watcher) = owner("wait")
    assert pid_alive(before) and pid_alive(after) and pid_alive(watcher), "all three run while the owner does"

    process.send_signal(signal.SIGKILL)  # no teardown, no atexit: what a killed pytest session does
    process.wait(10)
    until(lambda: not group_members(after), 10, "the watched sleeper's group to be killed")
    # The control: the watcher acted (above), and the group started before opting in still runs.
    assert group_members(before), "a group the owner never had watched is left alone"
    until(lambda: not pid_alive(watcher), 10, "the watcher to exit once it has done its work")


def test_an_owner_that_stops_its_groups_leaves_no_watcher_behind(owner: StartOwner) -> None:
    process, (before, after, watcher) = owner("stop")
    assert process.wait(30) == 0
    assert not group_members(after) and not group_members(before), "the owner stopped both"
    until(lambda: not pid_alive(watcher), 10, "the watcher to exit with its owner")
