"""The figures of an A/B run (`bench.servers`, `bench.partitions`, `bench.loglet`): medians over
rounds and the closing lines. Plain arithmetic, importable without the bench's measuring packages."""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import tarfile
from pathlib import Path
from typing import Any

Rows = list[dict[str, Any]]
# The main bench's cold wake at K=30 (`bench.run.wake_up`): a run this long, suspended, woken.
WAKE_STEPS = 30
Named = tuple[str, Rows]


def median(rows: Rows, key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def _ordered(first: Named, second: Named, over: str) -> tuple[Rows, Rows]:
    """The rows of the side named `over`, then the other's."""
    (a, ra), (b, rb) = first, second
    if over not in (a, b):
        raise ValueError(f"{over!r} is neither side ({a!r}, {b!r})")
    return (ra, rb) if over == a else (rb, ra)


def comparison(prefix: str, first: Named, second: Named, over: str) -> str:
    """Both sides' median CPU and throughput, and the side named `over` as a multiple of the
    other: `servers: hypercorn_cpu_ms=H granian_cpu_ms=G cpu_ratio=G/Hx hypercorn_per_s=A
    granian_per_s=B throughput_ratio=B/Ax` for `over="granian"`."""
    (a, ra), (b, rb) = first, second
    top, bottom = _ordered(first, second, over)
    return (
        f"{prefix}: {a}_cpu_ms={median(ra, 'cpu_ms'):.1f} {b}_cpu_ms={median(rb, 'cpu_ms'):.1f} "
        f"cpu_ratio={median(top, 'cpu_ms') / median(bottom, 'cpu_ms'):.2f}x "
        f"{a}_per_s={median(ra, 'per_s'):.2f} {b}_per_s={median(rb, 'per_s'):.2f} "
        f"throughput_ratio={median(top, 'per_s') / median(bottom, 'per_s'):.2f}x"
    )


def wake_comparison(prefix: str, first: Named, second: Named, over: str) -> str:
    """The same for the rounds' cold wakes (service and engine CPU per wake): `servers-wake:
    hypercorn_wake_cpu_ms=H granian_wake_cpu_ms=G wake_cpu_ratio=G/Hx` for `over="granian"`."""
    (a, ra), (b, rb) = first, second
    top, bottom = _ordered(first, second, over)
    return (
        f"{prefix}-wake: {a}_wake_cpu_ms={median(ra, 'wake_cpu_ms'):.1f} "
        f"{b}_wake_cpu_ms={median(rb, 'wake_cpu_ms'):.1f} "
        f"wake_cpu_ratio={median(top, 'wake_cpu_ms') / median(bottom, 'wake_cpu_ms'):.2f}x"
    )


def _at_least(floor: int) -> Any:
    def parse(text: str) -> int:
        value = int(text)
        if value < floor:
            raise argparse.ArgumentTypeError(f"{value} is below {floor}")
        return value

    parse.__name__ = "count"  # argparse names the type in its error: "invalid count value"
    return parse


def add_round_options(parser: argparse.ArgumentParser, rounds: int) -> None:
    """The options every A/B run takes: its rounds, and what each round measures."""
    parser.add_argument("--rounds", type=_at_least(1), default=rounds, help=f"rounds per side (default {rounds})")
    parser.add_argument("--concurrency", type=_at_least(1), default=10)
    parser.add_argument("--count", type=_at_least(1), default=150, help="replenishments per round")
    parser.add_argument(
        "--wakes",
        type=_at_least(0),
        default=30,
        help=f"cold wakes after {WAKE_STEPS} steps per round, after the replenishments (default 30; 0: none)",
    )


def closing_lines(prefix: str, first: Named, second: Named, over: str) -> None:
    """The cold wakes' line (when the rounds woke runs), then the closing line."""
    if first[1] and "wake_cpu_ms" in first[1][0]:
        print(wake_comparison(prefix, first, second, over), flush=True)
    print(comparison(prefix, first, second, over), flush=True)


def unpack(rev: str, into: Path, repo: Path) -> str:
    """The tree of commit `rev` of the git repository `repo`, unpacked into `into` (`bench.versions`'s
    sides); its full commit id. A name that is no commit there stops the run with a clear message."""
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise SystemExit(f"bench.versions: {rev!r} names no commit in {repo}")
    commit = found.stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=repo, capture_output=True, check=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit
