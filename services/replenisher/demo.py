"""`replenisher demo`: twenty SKUs replenishing themselves for a few compressed weeks.

Starts the local stack (restate-server, the simulated world with its demo catalogue, the
replenisher service) with a business day of about a second, turns some supplier faults
on, watches every SKU and prints what the agents do until the weeks have passed and
every replenishment has ended. The stack stays up afterwards for inspection.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from replenisher.demo_report import FaultTally, faulted_run, inspection_help, last_screen, plural
from replenisher.domain.sku import SkuRecord
from replenisher.stack.install import ensure_restate
from replenisher.stack.local import Stack, StackConfig

DEMO_SERVICE_ENV = {
    # Retries in fractions of a demo day rather than in real seconds.
    "REPLENISHER_STEP_INITIAL_RETRY_MS": "300",
    "REPLENISHER_STEP_MAX_RETRY_MS": "2000",
}

# What goes wrong during the demo, so the output shows the agent coping with it.
DEMO_FAULTS: dict[str, dict[str, Any]] = {
    "bolt": {"down_calls": 3},  # the supplier's API is down for a while: retried with backoff
    "acme": {"lose_reply_calls": 1},  # an order is taken but the answer is lost: still one order
    "cogs": {"drop_replies": 1},  # a confirmation never comes: the agent chases
}
DEMO_FAULTS_SAID = (
    "bolt's API fails its next 3 calls, acme loses its answer to the next order it takes, "
    "and cogs never sends its next reply."
)


def demo_skus() -> list[str]:
    from simulated_world.catalogue import demo

    return sorted(demo().items)


def run_demo(
    days: float = 21.0, day_seconds: float = 1.0, settle_seconds: float = 60.0, base: StackConfig | None = None
) -> int:
    """`base` moves the stack (state dir, ports) off the defaults, e.g. beside another running stack."""
    config = (base or StackConfig()).model_copy(
        update={
            "day_seconds": day_seconds,
            "catalogue": "demo",
            "config_file": Path("restate.toml") if Path("restate.toml").exists() else None,
            "service_env": DEMO_SERVICE_ENV,
        }
    )
    stack = Stack(config)
    if stack.is_up():
        say("a local stack is running: stopping it to start the demo afresh")
        stack.down()
    # The simulated world starts empty every time, so Restate's records must too.
    shutil.rmtree(stack.config.data_dir, ignore_errors=True)
    say(f"starting restate-server, the simulated world and the replenisher service (1 day = {day_seconds:g}s)")
    stack.up()
    cfg = stack.config
    skus = demo_skus()
    with httpx.Client(timeout=30) as client:
        for supplier, faults in DEMO_FAULTS.items():
            client.put(f"{cfg.world_url}/faults/suppliers/{supplier}", json=faults).raise_for_status()
        say(f"Faults switched on: {DEMO_FAULTS_SAID}")
        for sku in skus:
            client.post(f"{cfg.ingress_url}/SkuAgent/{sku}/watch", json={"interval_days": 1}).raise_for_status()
        say(f"watching {len(skus)} SKUs; each checks its stock every business day\n")
        progress = Progress(client, cfg.ingress_url, skus, day_seconds)
        progress.follow(days * day_seconds)
        for sku in skus:
            client.post(f"{cfg.ingress_url}/SkuAgent/{sku}/unwatch").raise_for_status()
        running = progress.poll()
        still = plural(running, "replenishment")
        say(f"\nday {progress.day():.0f}: the agents stop watching; letting the {still} still running finish")
        records = progress.follow(settle_seconds, until_idle=True)
        calls = client.get(f"{cfg.world_url}/admin/calls").json()["calls"]
        orders = client.get(f"{cfg.world_url}/admin/orders").json()["orders"]
    tally = FaultTally.from_world(calls, orders)
    run = faulted_run(tally, records)
    timeline = run_timeline(cfg, records[run.sku], run.run_id) if run else None
    help_text = inspection_help(cfg.ingress_url, cfg.admin_url, cfg.world_url, restate_cli(), run)
    print()
    print(last_screen(outcome_table(records), tally, run, timeline, help_text), end="")
    return 0


def run_timeline(cfg: StackConfig, record: SkuRecord, run_id: str) -> str | None:
    """The run drawn as `replenisher timeline` draws it, or None when Restate cannot say."""
    from replenisher.operations.restate.client import RestateClient
    from replenisher.operations.restate.errors import OperatorError
    from replenisher.operations.timelines import load_run_timeline
    from replenisher.timeline.text import render_text

    async def load() -> str:
        async with RestateClient(cfg.ingress_url, cfg.admin_url) as client:
            timeline = await load_run_timeline(client, record, run_id)
        return render_text(timeline, width=min(shutil.get_terminal_size((110, 24)).columns, 130))

    try:
        return asyncio.run(load())
    except (OperatorError, httpx.HTTPError) as exc:
        say(f"(could not draw {run_id}'s timeline: {exc})")
        return None


class Progress:
    """Polls every SKU's status and prints each run's start and end once, as it happens."""

    def __init__(self, client: httpx.Client, ingress: str, skus: list[str], day_seconds: float) -> None:
        self.client, self.ingress, self.skus, self.day_seconds = client, ingress, skus, day_seconds
        self.start = time.monotonic()
        self.seen: dict[str, tuple[str | None, int]] = {}
        self.records: dict[str, SkuRecord] = {}

    def day(self) -> float:
        return (time.monotonic() - self.start) / self.day_seconds

    def poll(self) -> int:
        """Report what changed since the last poll; returns how many runs are active."""
        for sku in self.skus:
            response = self.client.get(f"{self.ingress}/SkuAgent/{sku}/status")
            if response.status_code == 404:  # not watched yet
                continue
            response.raise_for_status()
            record = SkuRecord.model_validate(response.json())
            self.report(record, *self.seen.get(sku, (None, 0)))
            self.seen[sku] = (record.active.run_id if record.active else None, record.stats.runs)
            self.records[sku] = record
        return sum(1 for r in self.records.values() if r.active)

    def follow(self, seconds: float, until_idle: bool = False) -> dict[str, SkuRecord]:
        deadline = time.monotonic() + seconds
        while True:
            active = self.poll()
            if until_idle and not active:
                return self.records
            if time.monotonic() >= deadline:
                if until_idle:
                    say("Still running when the demo stopped waiting: " + ", ".join(self.active_skus()) + ".")
                return self.records
            time.sleep(min(0.5, self.day_seconds / 2))

    def active_skus(self) -> list[str]:
        return [sku for sku, record in self.records.items() if record.active]

    def report(self, record: SkuRecord, old_active: str | None, old_runs: int) -> None:
        finished = record.stats.runs - old_runs
        for result in record.outcomes[-finished:] if finished > 0 else []:
            price = f" at {result.unit_price:.2f}" if result.unit_price is not None else ""
            ended = f"{result.run_id} ended {result.outcome.upper()}{price}: {result.detail}"
            say(f"day {self.day():5.1f}  {record.sku}  {ended}")
        if record.active and record.active.run_id != old_active:
            a = record.active
            started = f"on hand {a.on_hand} < safety {a.safety_stock}: started {a.run_id}"
            say(f"day {self.day():5.1f}  {record.sku}  {started}")


def outcome_table(records: dict[str, SkuRecord]) -> str:
    rows = [("SKU", "runs", "outcomes", "last run", "detail")]
    for sku, record in sorted(records.items()):
        last = record.last_outcome
        counts = ", ".join(f"{k} {v}" for k, v in sorted(record.stats.by_outcome.items())) or "-"
        rows.append(
            (
                sku,
                str(record.stats.runs),
                counts,
                last.outcome if last else ("running" if record.active else "no run needed"),
                (last.detail if last else "")[:60],
            )
        )
    return format_rows(rows)


def format_rows(rows: Iterable[tuple[str, ...]]) -> str:
    rows = list(rows)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def restate_cli() -> str:
    """The shortest way to name the restate CLI from here: `.venv/bin/restate` after `make setup`."""
    linked = Path(sys.prefix) / "bin" / "restate"
    if linked.exists():
        return os.path.relpath(linked) if linked.is_relative_to(Path.cwd()) else str(linked)
    return str(ensure_restate().cli)


def say(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(run_demo())
