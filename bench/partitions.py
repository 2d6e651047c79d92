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
from typing import Any

from bench.ab import comparison, median

# The measuring side (bench.servers, and through it psutil and aiohttp from the `bench` extra)
# is imported only once the arguments are good: a bad command line is refused without it.

SETTING = "RESTATE_DEFAULT_NUM_PARTITIONS"


async def compare(
    counts: list[int], rounds: int, concurrency: int, count: int, workdir: Path
) -> dict[int, list[dict[str, Any]]]:
    from bench.servers import one_round, say
    from replenisher.stack.processes import service_server

    server = service_server()
    found: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    for i in range(rounds):
        for n in counts:
            say(f"round {i + 1} of {rounds}: {n} partition(s), {count} replenishments at concurrency {concurrency}")
            figures = await one_round(server, workdir, concurrency, count, f"p{n}-{i}", engine_env={SETTING: str(n)})
            say(
                f"  {n} partition(s): service {figures['service_ms']:.1f} ms + engine {figures['engine_ms']:.1f} ms "
                f"of CPU per replenishment, {figures['per_s']}/s, p50 {figures['p50_ms']:.0f} ms"
            )
            found[n].append(figures)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.partitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs=2, default=[1, 2], metavar="N", help="two counts (default 1 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per count (default 3)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--count", type=int, default=150, help="replenishments per round")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.counts) or args.counts[0] == args.counts[1]:
        parser.error("--counts takes two different counts, each at least 1")
    from bench.servers import say

    workdir = Path(tempfile.mkdtemp(prefix="replenisher-partitions-"))
    try:
        found = asyncio.run(compare(args.counts, args.rounds, args.concurrency, args.count, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for n, rows in found.items():
        say(
            f"{n} partition(s): median service {median(rows, 'service_ms'):.1f} ms + engine "
            f"{median(rows, 'engine_ms'):.1f} ms per replenishment, {median(rows, 'per_s'):.2f}/s "
            f"over {len(rows)} rounds"
        )
    a, b = args.counts
    print(comparison("partitions", (f"p{a}", found[a]), (f"p{b}", found[b]), over=f"p{a}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
