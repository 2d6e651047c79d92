"""Model calls per replenishment: our real stack with the Claude decider over the stand-in Messages API.

Counted twice, from sources that do not share a counter: the stand-in's own log of the requests
it received, and each run's ledger (`ReplenishmentResult.cost`) with its turns. A request offering
tools is a decision; one without is the reading of a supplier's reply. A turn where only one tool
was allowed is taken without a call: the ledger counts it (`only_allowed`), and the stand-in sees
it as a turn it was not asked about. The two counts must agree, run by run, or the measurement fails.

`python -m bench --model-calls` runs only this (a few seconds of replenishments on a stack of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.systems import OursClaude

JSON = dict[str, Any]
Progress = Callable[[str], None]
REPLENISHMENTS = 12
CONCURRENCY = 4


@dataclass(frozen=True)
class RunCount:
    """One replenishment as both sources saw it."""

    sku: str
    turns: int
    ledger: Mapping[str, Any]
    """The run's `CostLedger` as its result carries it."""
    requests: Sequence[Mapping[str, Any]]
    """The Messages API request bodies the stand-in received about this SKU."""

    @property
    def decisions(self) -> int:
        return sum(1 for r in self.requests if r.get("tools"))

    @property
    def readings(self) -> int:
        return len(self.requests) - self.decisions

    def disagreements(self) -> list[str]:
        """Where the stand-in's log and the run's ledger tell different stories (empty: they agree).

        Without refusals, fallbacks or budget stops, every turn is either one decision call or a
        turn taken without one; with them, turns and decision calls no longer pair one to one,
        and the count says so instead of guessing.
        """
        found = []
        if self.ledger["calls"] != len(self.requests):
            found.append(f"{self.sku}: ledger {self.ledger['calls']} calls, stand-in received {len(self.requests)}")
        overruled = {k: self.ledger.get(k, 0) for k in ("refused", "fallbacks", "budget_stops") if self.ledger.get(k)}
        if overruled:
            found.append(f"{self.sku}: turns were overruled ({overruled}): calls do not pair with turns")
        elif self.turns - self.decisions != self.ledger["only_allowed"]:
            found.append(
                f"{self.sku}: {self.turns} turns and {self.decisions} decision calls at the stand-in, "
                f"but the ledger has {self.ledger['only_allowed']} turns taken without a call"
            )
        return found


def per_replenishment(runs: Sequence[RunCount], total_requests: int) -> JSON:
    """The figures, from the stand-in's log and from the ledgers side by side, and whether they agree.

    `total_requests` is everything the stand-in received: a request no run accounts for (or one
    two runs claim) is a disagreement too.
    """
    if not runs:
        raise ValueError("no replenishments to count")
    n = len(runs)

    def mean(total: float) -> float:
        return round(total / n, 3)

    turns = sum(r.turns for r in runs)
    attributed = sum(len(r.requests) for r in runs)
    disagreements = [d for r in runs for d in r.disagreements()]
    if attributed != total_requests:
        disagreements.append(f"the stand-in received {total_requests} requests, the runs account for {attributed}")
    return {
        "replenishments": n,
        "turns_per_replenishment": mean(turns),
        "stand_in_api": {
            "model_calls_per_replenishment": mean(total_requests),
            "decisions_per_replenishment": mean(sum(r.decisions for r in runs)),
            "readings_per_replenishment": mean(sum(r.readings for r in runs)),
            "turns_without_a_call_per_replenishment": mean(turns - sum(r.decisions for r in runs)),
        },
        "ledgers": {
            "model_calls_per_replenishment": mean(sum(r.ledger["calls"] for r in runs)),
            "only_allowed_per_replenishment": mean(sum(r.ledger["only_allowed"] for r in runs)),
        },
        "agree": not disagreements,
        "disagreements": disagreements,
    }


def lines(figures: JSON) -> list[str]:
    """Both counts, as printed and as the docs' benchmarks page says them."""
    api, ledgers = figures["stand_in_api"], figures["ledgers"]
    return [
        f"model calls per replenishment (Claude decider, stand-in API, {figures['replenishments']} replenishments): "
        f"stand-in's request log {api['model_calls_per_replenishment']:g} "
        f"({api['decisions_per_replenishment']:g} decisions, {api['readings_per_replenishment']:g} reply readings), "
        f"runs' ledgers {ledgers['model_calls_per_replenishment']:g}",
        f"turns per replenishment {figures['turns_per_replenishment']:g}; taken without a call (one tool allowed): "
        f"stand-in {api['turns_without_a_call_per_replenishment']:g}, "
        f"ledgers {ledgers['only_allowed_per_replenishment']:g}; "
        + ("the two counts agree" if figures["agree"] else "DISAGREE: " + "; ".join(figures["disagreements"])),
    ]


async def measure_model_calls(system: OursClaude, say: Progress, count: int = REPLENISHMENTS) -> JSON:
    """`count` full replenishments (auto-approved), then both counts. Fails if they disagree."""
    # Imported here: the counting above stays importable without the bench's extra packages.
    import aiohttp

    from bench.scenarios import BenchError, Driver, bounded, expect

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
        driver = Driver(system, session, say)
        # Fixed width: no SKU's name is a part of another's, so the stand-in's log splits cleanly.
        skus = [f"MC-{i:03d}" for i in range(count)]
        await driver.stock_world("sup-model-calls", skus)
        await driver.manager(auto_approve=True)
        results: dict[str, JSON] = {}

        async def one(sku: str) -> None:
            results[sku] = await driver.replenish_once(sku)

        await bounded(CONCURRENCY, skus, one)
        not_received = {s: r["outcome"] for s, r in results.items() if r["outcome"] != "received"}
        if not_received:
            raise BenchError(f"not every replenishment ended received: {not_received}")
        api = system.api_url
        everything = await expect(session.get(f"{api}/admin/requests"), "the stand-in's request log")
        runs = []
        for sku in skus:
            about = await expect(session.get(f"{api}/admin/requests", params={"about": sku}), f"requests about {sku}")
            runs.append(RunCount(sku, results[sku]["turns"], results[sku]["cost"], about["requests"]))
    figures = per_replenishment(runs, len(everything["requests"]))
    for line in lines(figures):
        say(f"  {line}")
    if not figures["agree"]:
        disagreements = "; ".join(figures["disagreements"])
        raise BenchError(f"the stand-in's request log and the runs' ledgers disagree: {disagreements}")
    return {"label": system.label, **figures}


def run_model_calls(workdir: Path, say: Progress) -> JSON:
    """Start the stack with the stand-in, measure, stop everything it started."""
    import asyncio

    from bench.systems import OursClaude

    system = OursClaude(workdir)
    say(f"{system.label}: starting")
    try:
        system.start()
        return asyncio.run(measure_model_calls(system, say))
    finally:
        system.stop()
