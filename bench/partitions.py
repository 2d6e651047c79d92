"""`python -m bench.partitions`: our system with restate-server given different partition
counts, back to back in one run.

Each round starts the whole system afresh (a new data dir, so the count takes effect: it is
fixed when a data dir is first created), with the service on the default server, and measures
full replenishments at one concurrency, then cold wakes, as `bench.servers` does. The counts
take turns (1, 2, 1, 2, ...) so that drifting load hurts each alike; the figures are the median
of each count's rounds, and the last lines give the first count's as a multiple of the second's:

    partitions-wake: p1_wake_cpu_ms=A p2_wake_cpu_ms=B wake_cpu_ratio=Rx
    partitions: p1_cpu_ms=A p2_cpu_ms=B cpu_ratio=Rx p1_per_s=X p2_per_s=Y throughput_ratio=Tx

It is how `restate.toml`'s `default-num-partitions` was chosen (the docs' benchmarks page, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from bench.ab import Rows, add_round_options, closing_lines

# The measuring side (bench.servers, and through it psutil and aiohttp from the `bench` extra)
# is imported only once the arguments are good: a bad command line is refused without it.

SETTING = "RESTATE_DEFAULT_NUM_PARTITIONS"


def label(n: int) -> str:
    return f"{n} partition(s)"


async def compare(
    counts: list[int], rounds: int, concurrency: int, count: int, workdir: Path, wakes: int = 0
) -> dict[str, Rows]:
    from bench.servers import Side, alternate
    from replenisher.stack.processes import service_server

    server = service_server()
    sides = [Side(label(n), server, {SETTING: str(n)}) for n in counts]
    return await alternate(sides, rounds, concurrency, count, workdir, wakes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.partitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs=2, default=[1, 2], metavar="N", help="two counts (default 1 2)")
    add_round_options(parser, rounds=3)
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.counts) or args.counts[0] == args.counts[1]:
        parser.error("--counts takes two different counts, each at least 1")
    from bench.servers import say_medians

    workdir = Path(tempfile.mkdtemp(prefix="replenisher-partitions-"))
    try:
        found = asyncio.run(compare(args.counts, args.rounds, args.concurrency, args.count, workdir, args.wakes))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    say_medians(found)
    a, b = args.counts
    closing_lines("partitions", (f"p{a}", found[label(a)]), (f"p{b}", found[label(b)]), over=f"p{a}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
