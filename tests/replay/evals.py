"""`make evals`: the corpus of real runs replayed against the offline policy and the Claude decider.

Claude is the real `anthropic` client and the real `ClaudeDecider` over the stand-in Messages
API (tests/decider/mock_api.py: a mock transport, no network). Outside calls are counted by an
audit hook on every socket the process opens while replaying: a replay serves every result
from the record, so there must be none. The offline policy made the recorded decisions, so it
must agree on every turn; the stand-in model decides by its own priorities and may part.

The last line is `replay: runs=N turns=T agree=A diverged=D outside_calls=0`: N recorded runs,
and T turns over both deciders' replays (each recorded turn counted once per decider). Exit 1
if the offline policy diverged anywhere, an outside call was made, or the corpus is under 20 runs.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from tests.decider.mock_api import MockApi
from tests.replay.corpus import CORPUS, corpus

from replenisher.deciders.claude import ClaudeDecider
from replenisher.domain.decisions import Decider
from replenisher.domain.policy import OfflinePolicy
from replenisher.replay.core import ReplayReport, replay
from replenisher.replay_command import Summary

MIN_RUNS = 20


class OutsideCalls:
    """Counts sockets connected while `on`: the replay's only reachable party is the stand-in, in process."""

    def __init__(self) -> None:
        self.on = False
        self.seen: list[str] = []
        sys.addaudithook(self.hook)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.on and event in ("socket.connect", "socket.getaddrinfo"):
            self.seen.append(f"{event} {args[1:2]!r}")


def positive_control(outside: OutsideCalls) -> bool:
    """The counter sees a real connection attempt (to a port nobody listens on) while it is on."""
    import socket

    outside.on = True
    try:
        with socket.socket() as sock:
            sock.settimeout(1)
            sock.connect_ex(("127.0.0.1", 9))
    finally:
        outside.on = False
    seen = bool(outside.seen)
    outside.seen.clear()
    return seen


async def replay_corpus(decider: Decider, outside: OutsideCalls) -> list[ReplayReport]:
    reports = []
    for archive in corpus():
        outside.on = True
        try:
            reports.append(await replay(archive, decider, keep_going=True))
        finally:
            outside.on = False
    return reports


async def main() -> int:
    outside = OutsideCalls()
    if not positive_control(outside):
        print("FAILED: the outside-call counter did not see a connection made on purpose")
        return 1
    api = MockApi()
    passes = {
        "offline": await replay_corpus(OfflinePolicy(), outside),
        "claude (stand-in API)": await replay_corpus(ClaudeDecider(api.client(), "claude-sonnet-4-6"), outside),
    }
    for name, reports in passes.items():
        print(f"{name}: {Summary.of(reports).line().removeprefix('replay: ')}")
        for report in reports:
            if report.first_divergence is not None:
                d = report.first_divergence
                print(f"  {report.run_id} turn {d.turn}: recorded {d.recorded.tool}, replayed {d.replayed.tool}")
    runs = len(passes["offline"])
    every = [r for reports in passes.values() for r in reports]
    total = Summary.of(every)
    offline = Summary.of(passes["offline"])
    if outside.seen:
        print(f"outside calls during replay: {outside.seen[:5]}")
    problems = []
    if runs < MIN_RUNS:
        problems.append(f"the corpus in {CORPUS} holds {runs} runs, fewer than {MIN_RUNS}")
    if offline.diverged:
        problems.append(f"the offline policy parted from its own record on {offline.diverged} turns")
    if api.requests == []:
        problems.append("the Claude pass never asked the stand-in API")
    for problem in problems:
        print(f"FAILED: {problem}")
    print(
        f"replay: runs={runs} turns={total.turns} agree={total.agree} diverged={total.diverged} "
        f"outside_calls={len(outside.seen)}"
    )
    return 1 if problems or outside.seen else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
