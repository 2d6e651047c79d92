"""Stop the process groups a short-lived owner started when the owner dies without stopping them.

A pytest session (each xdist worker) starts restate-servers, services and worlds for its tests and
stops them in its fixtures' teardown. A session that is killed (SIGKILL, the kernel's out-of-memory
killer, a timeout that ends the process) runs no teardown, and its processes, each the leader of a
session of its own, lived on, holding ports and CPU. An owner that opts in
(`reap_with_this_process`) has `ManagedProcess` tell a small watcher each group it starts and
each it has stopped. The watcher holds the read end of a pipe whose only write end is the
owner's: when the owner ends, however it ends, the kernel closes that end, the watcher reads
end-of-file and SIGKILLs every group it was told of and not told is gone.

Only for owners whose processes must not outlive them: `replenisher stack up` leaves its processes
running on purpose, and never opts in.

The watcher runs this file as a script (`python -I -S`): it imports nothing but the standard
library, so it costs a few milliseconds to start and pulls in no package code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading


class _Owner:
    """This process's end of the pipe to its watcher (started with the first group watched)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.fd: int | None = None
        self.watcher: subprocess.Popen[bytes] | None = None

    def tell(self, line: str) -> None:
        with self.lock:
            if self.fd is None:
                read_end, self.fd = os.pipe()  # both ends close on exec: no other child inherits them
                try:
                    self.watcher = subprocess.Popen(
                        [sys.executable, "-I", "-S", os.path.abspath(__file__)],
                        stdin=read_end,
                        # Not the owner's stdout or stderr: an xdist worker talks to its
                        # controller over them, and a watcher holding them would outlive it.
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        # Its own session: a Ctrl-C or a kill of the owner's process group leaves
                        # it running to do its work.
                        start_new_session=True,
                    )
                finally:
                    os.close(read_end)
            with contextlib.suppress(BrokenPipeError):  # the watcher was killed: nothing to tell
                os.write(self.fd, line.encode())


_owner: _Owner | None = None


def reap_with_this_process() -> None:
    """Opt in: process groups this process starts from now on are SIGKILLed if it dies first."""
    global _owner
    if _owner is None or _owner.pid != os.getpid():  # a forked child gets its own watcher
        _owner = _Owner()


def watcher_pid() -> int | None:
    """The watcher's pid, once this process has told it of a group (for tests)."""
    return _owner.watcher.pid if _owner is not None and _owner.watcher is not None else None


def watch(pgid: int) -> None:
    """A group this process started; a no-op unless it opted in."""
    if _owner is not None and _owner.pid == os.getpid():
        _owner.tell(f"+{pgid}\n")


def forget(pgid: int) -> None:
    """A group this process saw gone (stopped, or killed and waited for)."""
    if _owner is not None and _owner.pid == os.getpid() and _owner.fd is not None:
        _owner.tell(f"-{pgid}\n")


def _watch_stdin() -> None:
    """The watcher: read `+pgid`/`-pgid` lines until the owner is gone, then kill what is left."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        text = line.strip().decode("ascii", "replace")
        if len(text) > 1 and text[1:].isdigit():
            (groups.add if text[0] == "+" else groups.discard)(int(text[1:]))
    for pgid in sorted(groups):
        # Linux hands out no pid still in use as a process group's id, so a group that is
        # still there is the one the owner started (or what it left behind).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    _watch_stdin()
