"""Record a corpus of real runs for the replay evals: `python scripts/record_runs.py [--out DIR]`.

Starts its own stack (restate-server, the simulated world with the demo catalogue, the
replenisher service) on free ports with a temporary data dir, plays the demo scenario with
its faults (an API down for a while, a lost answer to an order, a dropped confirmation) and
then, day by day, more: a supplier that goes quiet, price rises, answers lost again, and a
manager whose budget drops so that prices are rejected. When the runs have ended it reads
every run's archive from Restate (the `RunArchive` objects' state) and writes each ended one
to DIR as `<run id>.json`. The stack is stopped whatever happens.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from replenisher.demo import DEMO_FAULTS, DEMO_SERVICE_ENV, Progress, demo_skus
from replenisher.stack.admin import sql
from replenisher.stack.local import Stack, StackConfig
from replenisher.stack.ports import RestatePorts, free_port

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "fixtures" / "runs"

# (day, what happens): the fault scenarios, on top of the demo's own faults at day 0.
SCHEDULE: list[tuple[float, str, dict[str, Any]]] = [
    (3, "supplier cogs goes quiet", {"suppliers/cogs": {"quiet": True}}),
    (4, "acme raises its prices 30% after quoting", {"suppliers/acme": {"price_rise_pct": 30}}),
    (6, "bolt loses its answer to the next order", {"suppliers/bolt": {"lose_reply_calls": 1}}),
    (7, "the manager's budget drops: dearer prices are rejected", {"policy": {"max_unit_price": 20.0}}),
    (9, "cogs answers again; acme's answer to an order is lost", {"suppliers/cogs": {"quiet": False}}),
    (9, "", {"suppliers/acme": {"lose_reply_calls": 1, "price_rise_pct": 0}}),
    (9, "the manager's budget is back", {"policy": {"max_unit_price": 120.0}}),
    (12, "bolt drops its next two confirmations", {"suppliers/bolt": {"drop_replies": 2}}),
]


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def apply(client: httpx.Client, world: str, change: dict[str, Any]) -> None:
    for target, body in change.items():
        if target == "policy":
            # The whole policy each time: the world's PUT keeps any field left out.
            policy = {"auto_approve": True, "delay_days": 0.5, "over_budget": "reject", "max_unit_price": None, **body}
            client.put(f"{world}/manager/policy", json=policy).raise_for_status()
        else:
            client.put(f"{world}/faults/{target}", json=body).raise_for_status()


def archives(admin_url: str) -> list[dict[str, Any]]:
    rows = sql(admin_url, "SELECT value_utf8 FROM state WHERE service_name = 'RunArchive' AND key = 'archive'")
    return [json.loads(row["value_utf8"]) for row in rows]


def record(out: Path, days: float, day_seconds: float, settle_seconds: float) -> int:
    with tempfile.TemporaryDirectory(prefix="record-runs-") as tmp:
        config = StackConfig(
            state_dir=Path(tmp),
            restate=RestatePorts.free(),
            service_port=free_port(),
            world_port=free_port(),
            inbound_port=free_port(),
            day_seconds=day_seconds,
            catalogue="demo",
            config_file=REPO / "restate.toml",
            service_env=DEMO_SERVICE_ENV,
        )
        stack = Stack(config)
        say(f"starting a stack of its own in {tmp} (1 day = {day_seconds:g}s)")
        stack.up()
        try:
            cfg = stack.config
            skus = demo_skus()
            with httpx.Client(timeout=30) as client:
                apply(client, cfg.world_url, {f"suppliers/{s}": f for s, f in DEMO_FAULTS.items()})
                for sku in skus:
                    client.post(f"{cfg.ingress_url}/SkuAgent/{sku}/watch", json={"interval_days": 1}).raise_for_status()
                progress = Progress(client, cfg.ingress_url, skus, day_seconds)
                started = time.monotonic()
                for day, what, change in SCHEDULE:
                    progress.follow(max(0.0, started + day * day_seconds - time.monotonic()))
                    if what:
                        say(f"day {day:g}: {what}")
                    apply(client, cfg.world_url, change)
                progress.follow(max(0.0, started + days * day_seconds - time.monotonic()))
                for sku in skus:
                    client.post(f"{cfg.ingress_url}/SkuAgent/{sku}/unwatch").raise_for_status()
                progress.follow(settle_seconds, until_idle=True)
            kept = [a for a in archives(cfg.admin_url) if a.get("outcome") is not None]
        finally:
            stack.down()
    out.mkdir(parents=True, exist_ok=True)
    for archive in kept:
        (out / f"{archive['run_id']}.json").write_text(json.dumps(archive, indent=1, sort_keys=True) + "\n")
    outcomes: dict[str, int] = {}
    for archive in kept:
        outcomes[archive["outcome"]] = outcomes.get(archive["outcome"], 0) + 1
    say(f"wrote {len(kept)} archives to {out}: {outcomes}")
    return len(kept)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write them (default {DEFAULT_OUT})")
    p.add_argument("--days", type=float, default=18, help="business days to watch the SKUs (default 18)")
    p.add_argument("--day-seconds", type=float, default=2.0, help="seconds per business day (default 2)")
    p.add_argument("--settle-seconds", type=float, default=300, help="how long to let the last runs end (300)")
    p.add_argument("--min-runs", type=int, default=20, help="fail if fewer ended runs were recorded (20)")
    args = p.parse_args(argv)
    count = record(args.out, args.days, args.day_seconds, args.settle_seconds)
    return 0 if count >= args.min_runs else 1


if __name__ == "__main__":
    sys.exit(main())
