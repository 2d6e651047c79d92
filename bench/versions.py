"""`python -m bench.versions --base REV`: our service at two commits, back to back in one run.

A change meant to cut the work per replenishment is measured against the commit before it this
way: each round starts our whole system afresh (restate-server from this checkout's
`restate.toml`, this checkout's world) with the service taken from one side, the two sides
taking turns (base, head, base, head, ...) so that a machine whose load drifts hurts both alike,
as `bench.servers` does for the servers. The base is `git archive REV` unpacked in a temporary
directory; the head is this checkout as it is on disk, or `--head REV`. The last lines give the
head's figures as a multiple of the base's (below 1: the head costs less):

    versions-wake: base_wake_cpu_ms=B head_wake_cpu_ms=H wake_cpu_ratio=Rx
    versions: base_cpu_ms=B head_cpu_ms=H cpu_ratio=Rx base_per_s=A head_per_s=C throughput_ratio=Tx

Both sides run on the service's default server (`REPLENISHER_SERVER`, granian). Minutes, not part
of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from bench.ab import add_round_options, closing_lines, unpack
from bench.servers import Side, alternate, say, say_medians
from bench.systems import REPO_ROOT
from replenisher.stack.processes import service_server
from replenisher.stack.reaper import reap_with_this_process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.versions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to measure against (e.g. HEAD~1)")
    parser.add_argument("--head", help="the commit to measure (default: this checkout as it is on disk)")
    add_round_options(parser, rounds=3)
    args = parser.parse_args(argv)
    reap_with_this_process()  # killed mid-run, its engines, worlds and services go with it
    workdir = Path(tempfile.mkdtemp(prefix="replenisher-versions-"))
    try:
        base = unpack(args.base, workdir / "base", REPO_ROOT)
        head_source = None
        head = "the working tree"
        if args.head:
            head = unpack(args.head, workdir / "head", REPO_ROOT)
            head_source = workdir / "head"
        say(f"base {base[:10]} against head {head[:10]}")
        server = service_server()
        sides = [Side("base", server, source=workdir / "base"), Side("head", server, source=head_source)]
        found = asyncio.run(alternate(sides, args.rounds, args.concurrency, args.count, workdir, args.wakes))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    say_medians(found)
    closing_lines("versions", ("base", found["base"]), ("head", found["head"]), over="head")
    return 0


if __name__ == "__main__":
    sys.exit(main())
