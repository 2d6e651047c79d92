"""Where restate-server's CPU goes during full replenishments: Linux `perf` samples, summed by layer.

Taken in the same profiled pass as the service's py-spy samples (`bench.profile`), never in a
measured one. restate-server is a static Rust binary with its symbols, so `perf record` on its
pid names the functions; each sample goes to the first layer below that its symbol matches.
Where `perf` is missing or may not sample here (`perf_event_paranoid`, a container), the pass
says so and the report leaves the engine's table out rather than guessing.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

JSON = dict[str, Any]

# (layer, markers): a symbol belongs to the first layer one of whose markers it contains.
# Kernel symbols ([k]) are split by what the kernel was doing for the engine.
KERNEL_GROUPS = [
    (
        "kernel: switching and waking threads",
        ("finish_task_switch", "schedule", "_raw_spin_unlock", "futex", "try_to_wake_up", "ttwu", "sccp"),
    ),
    ("kernel: disk writes and syncs", ("iowrite", "blk_", "bio", "nvme", "virtblk", "ext4", "jbd2", "fsync", "io_")),
    ("kernel: loopback network (to the service)", ("tcp_", "ip_", "skb", "sock", "net_", "loopback", "__dev_")),
]
KERNEL_OTHER = "kernel: the rest (interrupts, page faults, timers, syscalls)"
USER_GROUPS = [
    ("RocksDB (memtables, writes, reads)", ("rocksdb::", "rocksdb_")),
    ("compression (zstd, lz4: RocksDB's blocks and WAL)", ("ZSTD_", "LZ4_", "HUF_", "FSE_", "HIST_")),
    (
        "copies and allocation (memcpy, jemalloc)",
        (
            "memcpy",
            "memmove",
            "memset",
            "memcmp",
            "malloc",
            "free",
            "_rjem_",
            "rallocx",
            "sdallocx",
            "realloc",
            "tcache",
        ),
    ),
    ("metrics and tracing", ("metrics", "tracing", "prometheus")),
    ("HTTP/2 to the service (hyper, h2)", ("h2::", "hyper::", "hyper_util", "http_body")),
    ("async runtime (tokio, futures)", ("tokio", "futures_", "crossbeam", "parking_lot")),
    ("encoding (flexbuffers, protobuf, serde)", ("flexbuffers", "prost", "serde", "bilrost", "bytes::")),
    ("Restate: partition processor, invoker, log, ingress (restate_*)", ("restate_",)),
]
USER_OTHER = "the rest (collections, caches, hashing, clocks)"
LAYERS = [g for g, _ in KERNEL_GROUPS] + [KERNEL_OTHER] + [g for g, _ in USER_GROUPS] + [USER_OTHER]

_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+\[(.)\]\s+(.+?)\s*$")


def layer_of(kind: str, symbol: str) -> str:
    groups, other = (KERNEL_GROUPS, KERNEL_OTHER) if kind == "k" else (USER_GROUPS, USER_OTHER)
    return next((g for g, markers in groups if any(m in symbol for m in markers)), other)


# A sample's share of the whole, its layer, and how the hottest symbols name it (already cut to length).
Sample = tuple[float, str, str]


def summarise_samples(report: str, read: Callable[[str], Sample | None], layers: list[str], top: int = 10) -> JSON:
    """A `perf report` text, each line `read` as a sample, summed into shares per layer (all of
    `layers`, in order) with the hottest symbols; empty when nothing was sampled."""
    shares: Counter[str] = Counter()
    symbols: list[tuple[float, str]] = []
    for line in report.splitlines():
        if line.startswith("#") or (sample := read(line)) is None:
            continue
        share, layer, label = sample
        shares[layer] += share
        symbols.append((share, label))
    total = sum(shares.values())
    if not total:
        return {}
    symbols.sort(reverse=True)
    return {
        "share": {g: round(shares[g] / total, 3) for g in layers},
        "top_self": [{"symbol": s, "share": round(x / total, 3)} for x, s in symbols[:top]],
    }


def _engine_sample(line: str) -> Sample | None:
    if not (m := _LINE.match(line)):
        return None
    kind, symbol = m.group(2), m.group(3)
    return float(m.group(1)) / 100, layer_of(kind, symbol), f"[{kind}] {symbol}"[:120]


def summarise_report(report: str, top: int = 10) -> JSON:
    """`perf report --fields overhead,sym` text, as shares per layer and the hottest symbols."""
    return summarise_samples(report, _engine_sample, LAYERS, top)


def unavailable() -> str | None:
    """Why `perf` cannot sample another process here, or None if it can."""
    if shutil.which("perf") is None:
        return "perf is not installed (Debian: linux-perf)"
    try:
        level = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        level = None
    probe = subprocess.run(["perf", "stat", "-e", "task-clock", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"perf may not sample here (perf_event_paranoid {level}): {probe.stderr.strip()[-200:]}"
    return None


class PerfSampler:
    """`perf record` on one process while a burst runs; `stop()` gives its report, summarised.

    `fields` are `perf report`'s columns and `summarise` reads that report: restate-server's by
    symbol (`summarise_report`), the service's by shared object (`bench.service_profile`)."""

    def __init__(
        self,
        pid: int,
        data: Path,
        frequency: int = 499,
        fields: str = "overhead,sym",
        summarise: Callable[[str], dict[str, Any]] = summarise_report,
    ) -> None:
        self.pid = pid
        self.data = data
        self.frequency = frequency
        self.fields = fields
        self.summarise = summarise
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            "perf",
            "record",
            "-F",
            str(self.frequency),
            "-p",
            str(self.pid),
            "-o",
            str(self.data),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        await asyncio.sleep(0.5)  # let perf attach

    async def stop(self) -> dict[str, Any]:
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)  # perf writes its data and exits
        _, err = await asyncio.wait_for(self.process.communicate(), 60)
        if not self.data.exists():
            raise RuntimeError(f"perf wrote nothing: {err.decode(errors='replace')[-500:]}")
        command = ["perf", "report", "-i", str(self.data), "--no-children", "--fields", self.fields]
        command += ["-g", "none", "--stdio", "--percent-limit", "0"]
        report = await asyncio.to_thread(
            subprocess.run,
            command,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if report.returncode != 0:
            raise RuntimeError(f"perf report failed: {report.stderr[-500:]}")
        samples = re.search(r"# Samples: (\d+\S*)", report.stdout)
        summary = self.summarise(report.stdout)
        summary["samples"] = samples.group(1) if samples else None
        return summary
