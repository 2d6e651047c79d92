"""`python -m bench.loglet`: our system with restate-server's log kept by the local loglet and by
the replicated one, back to back in one run.

Each round starts the whole system afresh (a new data dir), with `bifrost.default-provider` set
for that round over `restate.toml`, and measures full replenishments at one concurrency, then
cold wakes, as `bench.servers` does. The providers take turns so that drifting load hurts each
alike; the figures are the median of each provider's rounds, and the last lines give the local
loglet's as a multiple of the replicated one's:

    loglet-wake: replicated_wake_cpu_ms=A local_wake_cpu_ms=B wake_cpu_ratio=Rx
    loglet: replicated_cpu_ms=A local_cpu_ms=B cpu_ratio=Rx replicated_per_s=X local_per_s=Y throughput_ratio=Tx

It is how `restate.toml`'s `[bifrost] default-provider` was chosen (the docs' benchmarks page, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from bench.ab import add_round_options, closing_lines

# As in bench.partitions: the measuring side is imported only once the arguments are good.

SETTING = "RESTATE_BIFROST__DEFAULT_PROVIDER"
PROVIDERS = ("replicated", "local")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loglet", description=__doc__.split("\n\n")[0])
    add_round_options(parser, rounds=3)
    args = parser.parse_args(argv)
    from bench.servers import Side, alternate, say_medians
    from replenisher.stack.processes import service_server

    sides = [Side(provider, service_server(), {SETTING: provider}) for provider in PROVIDERS]
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-loglet-"))
    try:
        found = asyncio.run(alternate(sides, args.rounds, args.concurrency, args.count, workdir, args.wakes))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    say_medians(found)
    replicated, local = PROVIDERS
    closing_lines("loglet", (replicated, found[replicated]), (local, found[local]), over=local)
    return 0


if __name__ == "__main__":
    sys.exit(main())
