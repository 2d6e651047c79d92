"""What the kernel says about a process group, read from /proc with the standard library alone.

Every process a stack starts (`replenisher.stack.processes.ManagedProcess`) leads a session and
process group of its own, so a group is the process and whatever it spawned (granian's workers).
No psutil: `make bench-scale` and its test run with the project's own dependencies.
"""

from __future__ import annotations

import os
from pathlib import Path


def task_cpu_seconds(pid: int) -> float:
    """CPU time of every thread of `pid`, from the scheduler's per-thread run time in nanoseconds
    (/proc/<pid>/stat counts 10 ms ticks, too coarse for work that costs a few milliseconds).
    Raises OSError when the process is gone."""
    total_ns = 0
    for task in os.scandir(f"/proc/{pid}/task"):
        with open(f"{task.path}/schedstat") as f:
            total_ns += int(f.read().split()[0])
    return total_ns / 1e9


def task_switches(pid: int) -> int:
    """Context switches of every thread of `pid`, voluntary (a thread waiting: for a lock, a
    wake-up, the network) and involuntary, from each thread's /proc status. Raises OSError when
    the process is gone."""
    total = 0
    for task in os.scandir(f"/proc/{pid}/task"):
        with open(f"{task.path}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                    total += int(line.split()[1])
    return total


def group_pids(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{entry.path}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and brackets, so split after the last ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def group_cpu_seconds(pgid: int) -> float:
    total = 0.0
    for pid in group_pids(pgid):
        try:
            total += task_cpu_seconds(pid)
        except (OSError, ValueError, IndexError):
            continue  # gone between the listing and the read
    return total


def group_switches(pgid: int) -> int:
    """Context switches of every thread of every live process of group `pgid` (`task_switches`)."""
    total = 0
    for pid in group_pids(pgid):
        try:
            total += task_switches(pid)
        except OSError:
            continue  # ended since the group was listed
    return total


def group_memory_mb(pgid: int) -> dict[str, float]:
    """RSS and PSS (shared pages split among their users) of the group, from smaps_rollup."""
    kb = {"Rss": 0, "Pss": 0}
    for pid in group_pids(pgid):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    key, _, rest = line.partition(":")
                    if key in kb:
                        kb[key] += int(rest.split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return {"rss_mb": kb["Rss"] / 1024, "pss_mb": kb["Pss"] / 1024}


def dir_mb(path: Path, apparent: bool = False) -> float:
    """Disk the files under `path` take: their allocated blocks, or with `apparent` their sizes (what
    they hold, without the space RocksDB preallocates for files still being written)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += stat.st_size if apparent else stat.st_blocks * 512
    return total / 2**20


def connections_by_pid(pids: list[int], port: int) -> dict[int, int]:
    """How many established TCP connections to local `port` each of `pids` holds (by their sockets'
    inodes in /proc/net/tcp{,6} and each process's open file descriptors): which of a server's worker
    processes accepted which of its callers' connections."""
    established: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEX_IP:HEX_PORT; state 01 is ESTABLISHED; the inode is the tenth field.
            if len(fields) > 9 and fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                established.add(fields[9])
    held: dict[int, int] = {}
    for pid in pids:
        inodes: set[str] = set()
        try:
            descriptors = list(os.scandir(f"/proc/{pid}/fd"))
        except OSError:
            descriptors = []
        for fd in descriptors:
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
        held[pid] = len(inodes & established)
    return held
