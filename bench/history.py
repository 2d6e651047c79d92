"""History grows: one SKU through many replenishments; its record must stay small and fast.

Drives N replenishments of one SKU back to back (a compressed day, suppliers that answer
and deliver at once, a manager who approves at once) and prints, as it goes, the size of the
SKU agent's stored record in bytes and how long its handlers take, against the first runs.
`python -m bench.history --runs 1000`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.own_stack import start_own_stack
from replenisher.domain.sku import RECENT_OUTCOMES
from replenisher.stack.admin import sql

DAY_SECONDS = 0.01


def arrange(world: httpx.Client, sku: str, supplier: str) -> None:
    """A SKU that is out of stock again as soon as its goods are in."""
    setup = {"name": supplier, "prices": {sku: 4.0}, "lead_days": 0, "reply_days": 0, "quote_valid_days": 300}
    world.put(f"/admin/suppliers/{supplier}", json=setup).raise_for_status()
    item = {
        "on_hand": 0,
        "safety_stock": 20,
        "target_stock": 100,
        "daily_consumption": 100_000,
        "suppliers": [supplier],
    }
    world.put(f"/admin/items/{sku}", json=item).raise_for_status()
    world.put(
        "/manager/policy", json={"auto_approve": True, "max_unit_price": 1000, "delay_days": 0}
    ).raise_for_status()


@dataclass
class Sample:
    runs: int
    record_bytes: int
    status_ms: float
    write_ms: float


@dataclass
class History:
    samples: list[Sample] = field(default_factory=list)


def timed_ms(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def median_ms(call: Callable[[], object], times: int = 21) -> float:
    return statistics.median(timed_ms(call) for _ in range(times))


def record_bytes(admin_url: str, sku: str) -> int:
    rows = sql(admin_url, f"SELECT value_utf8 FROM state WHERE service_name = 'SkuAgent' AND service_key = '{sku}'")
    return sum(len(r["value_utf8"].encode()) for r in rows if r.get("value_utf8"))


def replenish_once(ingress: httpx.Client, sku: str, deadline_s: float = 60) -> str:
    """Start one replenishment with `check` and wait for its outcome; returns it."""
    started = ingress.post(f"/SkuAgent/{sku}/check").raise_for_status().json()["started"]
    if started is None:
        raise RuntimeError(f"{sku}: check started no replenishment")
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        record = ingress.get(f"/SkuAgent/{sku}/status").raise_for_status().json()
        if record["active"] is None:
            return record["outcomes"][-1]["outcome"]
        time.sleep(0.02)
    raise RuntimeError(f"{started} did not end within {deadline_s:g}s")


def drive(ingress: httpx.Client, admin_url: str, sku: str, runs: int, every: int, out: History) -> None:
    for n in range(1, runs + 1):
        outcome = replenish_once(ingress, sku)
        if outcome != "received":
            raise RuntimeError(f"run {n} of {sku} ended {outcome}")
        if n in (1, RECENT_OUTCOMES) or n % every == 0 or n == runs:
            status_ms = median_ms(lambda: ingress.get(f"/SkuAgent/{sku}/status"))
            # An exclusive handler that reads and writes back the whole record, changing nothing.
            write_ms = median_ms(lambda: ingress.post(f"/SkuAgent/{sku}/configure", json={}))
            out.samples.append(Sample(n, record_bytes(admin_url, sku), status_ms, write_ms))
            s = out.samples[-1]
            print(
                f"history: {n:5d} runs  record {s.record_bytes:7d} bytes  "
                f"status {s.status_ms:6.1f} ms  configure {s.write_ms:6.1f} ms",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100, help="sample every N runs")
    args = parser.parse_args(argv)

    base = Path(tempfile.mkdtemp(prefix="replenisher-history-"))
    # Days are a hundredth of a second here; the waits must not time out on machine hiccups.
    long_wait = str(int(60 / DAY_SECONDS))
    waits = {
        "REPLENISHER_APPROVAL_WAIT_DAYS": long_wait,
        "REPLENISHER_REPLY_WAIT_DAYS": long_wait,
        "REPLENISHER_GOODS_GRACE_DAYS": long_wait,
    }
    stack = start_own_stack(base, DAY_SECONDS, waits)
    history = History()
    try:
        with (
            httpx.Client(base_url=stack.restate.ingress_url, timeout=30) as ingress,
            httpx.Client(base_url=stack.world.url, timeout=30) as world_client,
        ):
            arrange(world_client, "HIST-1", "hist-supplier")
            drive(ingress, stack.restate.admin_url, "HIST-1", args.runs, args.every, history)
    finally:
        stack.stop()
    first, last = history.samples[0], history.samples[-1]
    # The record is full (capped outcome list) from RECENT_OUTCOMES runs on: compare with that too.
    full = next((x for x in history.samples if x.runs >= RECENT_OUTCOMES), first)
    biggest = max(x.record_bytes for x in history.samples)
    print(
        f"history: runs={last.runs} record_bytes={last.record_bytes} (at run {full.runs}: {full.record_bytes}) "
        f"max_record_bytes={biggest}"
    )
    print(
        f"history: handler time, last sample against run {first.runs} / run {full.runs}: "
        f"status {last.status_ms / first.status_ms:.2f} / {last.status_ms / full.status_ms:.2f}, "
        f"configure {last.write_ms / first.write_ms:.2f} / {last.write_ms / full.write_ms:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
