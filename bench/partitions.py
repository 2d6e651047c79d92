"""`python -m bench.partitions`: our system with restate-server given different partition
counts, back to back in one run.

Each round starts the whole system afresh (a new data dir, so the count takes effect: it is
fixed when a data dir is first created), with the service on the default server, and measures
full replenishments at one concurrency as `bench.servers` does. The counts take turns (1, 2,
1, 2, ...) so that drifting load hurts each alike; the figures are the median of each count's
rounds, and the last line gives the first count's as a multiple of the second's:

    partitions: p1_cpu_ms=A p2_cpu_ms=B cpu_ratio=Rx p1_per_s=X p2_per_s=Y throughput_ratio=Tx

It is how `restate.toml`'s `default-num-partitions` was chosen (README "Benchmarks").
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from bench.ab import Rows, comparison

# The measuring side (bench.servers, and through it psutil and aiohttp from the `bench` extra)
# is imported only once the arguments are good: a bad command line is refused without it.

SETTING = "RESTATE_DEFAULT_NUM_PARTITIONS"


def label(n: int) -> str:
    return f"{n} partition(s)"


async def compare(counts: list[int], rounds: int, concurrency: int, count: int, workdir: Path) -> dict[str, Rows]:
    from bench.servers import Side, alternate
    from replenisher.stack.processes import service_server

    server = service_server()
    sides = [Side(label(n), server, {SETTING: str(n)}) for n in counts]
    return await alternate(sides, rounds, concurrency, count, workdir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.partitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs=2, default=[1, 2], metavar="N", help="two counts (default 1 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per count (default 3)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--count", type=int, default=150, help="replenishments per round")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.counts) or args.counts[0] == args.counts[1]:
        parser.error("--counts takes two different counts, each at least 1")
    from bench.servers import say_medians

    workdir = Path(tempfile.mkdtemp(prefix="replenisher-partitions-"))
    try:
        found = asyncio.run(compare(args.counts, args.rounds, args.concurrency, args.count, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    say_medians(found)
    a, b = args.counts
    first, second = (f"p{a}", found[label(a)]), (f"p{b}", found[label(b)])
    print(comparison("partitions", first, second, over=f"p{a}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
