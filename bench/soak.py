"""Chaos soak: many SKUs through many replenishments while everything that can fail does.

Starts its own restate-server, simulated world and replenisher service on free ports, has
the manager auto-approve, watches every SKU, and until the target number of replenishments
has ended keeps doing damage at random: SIGKILL the service or restate-server (and bring
it back), take a supplier down, lose the answer to an order it took, drop or withhold its
replies, raise its prices. Then it stops the damage, lets the runs finish and checks the
outcome against the world's own records:

- every order a supplier holds is a PO the agents placed, for the SKU on it;
- no PO has two orders, and no run has orders under two POs;
- every run has ended, or is visibly waiting for something;
- every message the world delivered was read by a run or kept in its SKU's record.

It prints `soak: runs=N faults=N duplicates=0 lost=0 stuck=0` and exits non-zero when an
invariant breaks. `python -m bench.soak --runs 1000` for the long one; SOAK_SEED repeats one.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.own_stack import OwnStack, start_own_stack
from replenisher.domain.sku import RECENT_OUTCOMES, SkuRecord

DAY_SECONDS = 0.1
SUPPLIERS = ("north", "south", "east")


def start_stack(base: Path) -> OwnStack:
    service_env = {
        "REPLENISHER_STEP_INITIAL_RETRY_MS": "100",
        "REPLENISHER_STEP_MAX_RETRY_MS": "1000",
        "REPLENISHER_STEP_MAX_ATTEMPTS": "4",
        "REPLENISHER_REST_AFTER_FAILURE_DAYS": "2",
        # 3 s to decide or confirm: a crash (a second or so) can still push a wait past its
        # deadline, but most runs get as far as ordering, where the faults matter most.
        "REPLENISHER_APPROVAL_WAIT_DAYS": "30",
        "REPLENISHER_REPLY_WAIT_DAYS": "30",
        "REPLENISHER_GOODS_GRACE_DAYS": "30",
    }
    return start_own_stack(base, DAY_SECONDS, service_env, {"RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL": "1s"})


def seed_world(client: httpx.Client, world: str, skus: list[str], rng: random.Random) -> None:
    for i, supplier in enumerate(SUPPLIERS):
        setup = {
            "name": supplier.title(),
            "prices": {sku: round(5 + rng.random() * 20, 2) for sku in skus},
            "lead_days": 2 + i,
            "reply_days": 0.5 + i * 0.5,
            "price_drift": 0.02,
            "deliveries": 1 + i % 2,
            "quote_valid_days": 20,
        }
        client.put(f"{world}/admin/suppliers/{supplier}", json=setup).raise_for_status()
    for sku in skus:
        item = {"on_hand": 10, "safety_stock": 20, "target_stock": 60, "daily_consumption": 8, "suppliers": SUPPLIERS}
        client.put(f"{world}/admin/items/{sku}", json=item).raise_for_status()
    policy = {"auto_approve": True, "max_unit_price": 1000, "delay_days": 0.5}
    client.put(f"{world}/manager/policy", json=policy).raise_for_status()


FAULTS = ["kill service", "kill restate", "supplier down", "answer lost", "down after order", "drop replies"]
FAULTS += ["quiet", "price rise"]


def do_damage(stack: OwnStack, client: httpx.Client, rng: random.Random) -> str:
    fault = rng.choice(FAULTS)
    supplier = rng.choice(SUPPLIERS)
    world = stack.world.url
    if fault in ("kill service", "kill restate"):
        process = stack.service if fault == "kill service" else stack.restate
        process.kill()
        time.sleep(rng.uniform(0, 1.5))  # down for a while: that is the fault
        process.restart()
        return fault
    faults: dict[str, Any] = {
        "supplier down": {"down_calls": rng.randint(2, 12)},
        "answer lost": {"lose_reply_calls": 1},
        "down after order": {"lose_reply_calls": 1, "down_after_order_calls": rng.randint(4, 20)},
        "drop replies": {"drop_replies": rng.randint(1, 2)},
        "quiet": {"quiet": True},
        "price rise": {"price_rise_pct": rng.choice([5, 10, 25])},
    }[fault]
    client.put(f"{world}/faults/suppliers/{supplier}", json=faults).raise_for_status()
    if fault == "quiet":
        client.put(f"{world}/faults/suppliers/{rng.choice(SUPPLIERS)}", json={"quiet": False}).raise_for_status()
    return f"{fault} ({supplier})"


def records(client: httpx.Client, ingress: str, skus: list[str]) -> dict[str, SkuRecord]:
    found = {}
    for sku in skus:
        response = client.get(f"{ingress}/SkuAgent/{sku}/status")
        if response.status_code == 200:
            found[sku] = SkuRecord.model_validate(response.json())
    return found


def ended_runs(client: httpx.Client, ingress: str, skus: list[str]) -> int:
    return sum(r.stats.runs for r in records(client, ingress, skus).values())


@dataclass
class Verdict:
    runs: int
    faults: int
    duplicates: int
    lost: int
    stuck: int
    problems: list[str]

    def line(self) -> str:
        return (
            f"soak: runs={self.runs} faults={self.faults} duplicates={self.duplicates} "
            f"lost={self.lost} stuck={self.stuck}"
        )


def audit(stack: OwnStack, client: httpx.Client, skus: list[str], faults: int) -> Verdict:
    ingress, world = stack.restate.ingress_url, stack.world.url
    agents = records(client, ingress, skus)
    orders = client.get(f"{world}/admin/orders").json()["orders"]
    messages = client.get(f"{world}/admin/messages").json()["messages"]
    problems: list[str] = []

    # Orders against POs: one order per PO, one PO ordered per run, every order a known PO.
    per_po = Counter(o["po_number"] for o in orders)
    duplicates = sum(n - 1 for n in per_po.values() if n > 1)
    per_run = Counter(re.sub(r"-\d+$", "", o["po_number"]) for o in orders)
    duplicates += sum(n - 1 for n in per_run.values() if n > 1)
    problems += [f"PO {po} has {n} orders" for po, n in per_po.items() if n > 1]
    problems += [f"run {run} has {n} live orders" for run, n in per_run.items() if n > 1]
    known_pos = {o.po_number for r in agents.values() for o in r.outcomes if o.po_number}
    for record in agents.values():
        if record.active is not None:
            state = client.post(f"{ingress}/Replenish/{record.active.run_id}/state").json()["state"] or {}
            if state.get("po"):
                known_pos.add(state["po"]["po_number"])
    for order in orders:
        if order["sku"] not in skus or not order["po_number"].startswith(f"PO-{order['sku']}-"):
            duplicates += 1
            problems.append(f"order {order['po_number']} is not for a SKU's own PO")
        elif order["po_number"] not in known_pos and agents[order["sku"]].stats.runs <= RECENT_OUTCOMES:
            # (past RECENT_OUTCOMES runs the record no longer lists every PO it placed)
            duplicates += 1
            run_id = "replenish-" + re.sub(r"-\d+$", "", order["po_number"]).removeprefix("PO-")
            seen = [o for o in agents[order["sku"]].outcomes if o.run_id == run_id]
            problems.append(
                f"order {order['po_number']} is held by {order['supplier']} but no run placed it; {run_id}: "
                + (f"{seen[0].outcome} with {seen[0].po_number}: {seen[0].detail}" if seen else "no record")
            )
            history = client.post(f"{ingress}/Replenish/{run_id}/state").json()["state"]["history"]
            problems += [f"  {t['turn']} {t['tool']}: {t['summary']}" for t in history]

    # Messages: every one the world delivered was read by a run, or is kept, or waits in the active run.
    lost = 0
    for sku in skus:
        record = agents.get(sku)
        delivered = sum(1 for m in messages if m["sku"] == sku and m["status"] == "delivered")
        undelivered = [m for m in messages if m["sku"] == sku and m["status"] != "delivered"]
        if undelivered:
            lost += len(undelivered)
            problems.append(f"{sku}: {len(undelivered)} messages never delivered: {undelivered[0]['reason']}")
        if record is None:
            lost += delivered
            continue
        accounted = record.stats.messages_consumed + len(record.kept) + record.kept_overflow
        accounted += len(record.active.routed) if record.active else 0
        if accounted != delivered:
            lost += abs(delivered - accounted)
            problems.append(f"{sku}: the world delivered {delivered} messages, the agent accounts for {accounted}")

    # Runs: ended, or visibly waiting for something.
    stuck = 0
    for sku, record in agents.items():
        if record.active is not None:
            waiting = client.post(f"{ingress}/Replenish/{record.active.run_id}/current_wait").json()
            if not waiting:
                stuck += 1
                problems.append(f"{sku}: {record.active.run_id} is active and waits for nothing")
    runs = sum(r.stats.runs for r in agents.values())
    outcomes: Counter[str] = Counter()
    for record in agents.values():
        outcomes.update(record.stats.by_outcome)
    print("soak: outcomes " + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
    reasons = Counter(
        f"{o.outcome}: {re.sub(r'[0-9.]+', 'N', o.detail)}"
        for r in agents.values()
        for o in r.outcomes
        if o.outcome != "received"
    )
    for reason, n in reasons.most_common(4):
        print(f"soak:   {n:4d} x {reason}")
    return Verdict(runs, faults, duplicates, lost, stuck, problems)


def settle(stack: OwnStack, client: httpx.Client, skus: list[str], timeout: float) -> None:
    """No more damage: suppliers behave, watching stops, running replenishments finish."""
    ingress, world = stack.restate.ingress_url, stack.world.url
    for supplier in SUPPLIERS:
        client.delete(f"{world}/faults/suppliers/{supplier}").raise_for_status()
    for sku in skus:
        client.post(f"{ingress}/SkuAgent/{sku}/unwatch").raise_for_status()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agents = records(client, ingress, skus)
        pending = [m for m in client.get(f"{world}/admin/messages").json()["messages"] if m["status"] == "pending"]
        if not pending and not any(r.active for r in agents.values()):
            return
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("SOAK_RUNS", "30")))
    parser.add_argument("--skus", type=int, default=8)
    parser.add_argument("--max-minutes", type=float, default=float(os.environ.get("SOAK_MAX_MINUTES", "10")))
    parser.add_argument("--fault-every", type=float, default=1.5, help="seconds between faults, on average")
    parser.add_argument("--min-faults", type=int, default=int(os.environ.get("SOAK_MIN_FAULTS", "20")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", str(random.randrange(1 << 30)))))
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    skus = [f"SOAK-{i:03d}" for i in range(1, args.skus + 1)]
    base = Path(tempfile.mkdtemp(prefix="replenisher-soak-"))
    print(
        f"soak: seed {args.seed}, {len(skus)} SKUs, until {args.runs} replenishments have ended "
        f"and {args.min_faults} faults were injected; logs in {base}"
    )
    stack = start_stack(base)
    faults = 0
    try:
        with httpx.Client(timeout=httpx.Timeout(60.0, connect=5.0)) as client:
            seed_world(client, stack.world.url, skus, rng)
            for sku in skus:
                client.post(f"{stack.restate.ingress_url}/SkuAgent/{sku}/watch", json={}).raise_for_status()
            started = time.monotonic()
            last_report = 0.0
            while True:
                done = ended_runs(client, stack.restate.ingress_url, skus)
                elapsed = time.monotonic() - started
                if (done >= args.runs and faults >= args.min_faults) or elapsed > args.max_minutes * 60:
                    break
                if elapsed - last_report > 10:
                    print(f"soak: {elapsed:4.0f}s  {done} replenishments ended, {faults} faults so far", flush=True)
                    last_report = elapsed
                time.sleep(rng.expovariate(1 / args.fault_every))
                what = do_damage(stack, client, rng)
                faults += 1
                print(f"soak: {time.monotonic() - started:4.0f}s  fault: {what}", flush=True)
            print("soak: stopping the damage and letting the running replenishments finish", flush=True)
            settle(stack, client, skus, timeout=180)
            verdict = audit(stack, client, skus, faults)
    finally:
        stack.stop()
    for problem in verdict.problems:
        print(f"soak: PROBLEM: {problem}")
    short = verdict.runs < args.runs
    if short:
        print(f"soak: only {verdict.runs} of {args.runs} replenishments ended within {args.max_minutes:g} minutes")
    print(verdict.line())
    return 1 if verdict.problems or short else 0


if __name__ == "__main__":
    sys.exit(main())
