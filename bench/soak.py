"""Chaos soak: many SKUs through many replenishments while everything that can fail does.

Starts its own restate-server, simulated world and replenisher service on free ports, has
the manager auto-approve, watches every SKU, and until the target number of replenishments
has ended keeps doing damage at random: SIGKILL the service or restate-server (and bring
it back), take a supplier down, lose the answer to an order it took, drop or withhold its
replies, raise its prices. Then it stops the damage, lets the runs finish and audits the
outcome PO by PO against the world's own records (`bench.soak_audit` says exactly what):
every order at every supplier matched to a run's PO; every run of every SKU (ids
1..runs_started) read and accounted for; every message the world sent matched one by one to
a run that consumed it or a SKU that keeps it; waits past their deadline, invocations Restate
is backing off or failed, and orders open with no run following them counted as stuck.

It ends with `soak: runs=N faults=F pos_audited=P duplicates=0 lost=0 stuck=0
open_orders_without_run=0` and exits non-zero when anything is off. `python -m bench.soak
--runs 1000` for the long one; SOAK_SEED repeats one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.own_stack import OwnStack, start_own_stack
from bench.soak_audit import Evidence, audit
from replenisher.domain.sku import SkuRecord, run_id_of
from replenisher.stack.admin import sql

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
        # A watched SKU checks its stock every 3 business days (0.3 s here) rather than every day:
        # with 24 SKUs a daily check is some 170 checks a second, each an ERP read and a Restate
        # invocation, CPU taken from the runs the soak is about.
        "REPLENISHER_CHECK_INTERVAL_DAYS": "3",
    }
    return start_own_stack(base, DAY_SECONDS, service_env, {"RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL": "1s"})


def stack_cpu_seconds(stack: OwnStack) -> float:
    """CPU time the soak and its stack have used: this process, the processes it has reaped
    (killed ones included), and the live restate-server, world and service."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for process in (stack.restate, stack.world, stack.service):
        if process.pid is not None and process.running:
            try:
                fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def seed_world(client: httpx.Client, world: str, skus: list[str], rng: random.Random) -> None:
    for i, supplier in enumerate(SUPPLIERS):
        setup = {
            "name": supplier.title(),
            "prices": {sku: round(5 + rng.random() * 20, 2) for sku in skus},
            "lead_days": 2 + i,
            "reply_days": 0.5 + i * 0.5,
            "price_drift": 0.02,
            "deliveries": 1 + i % 2,
            # Quotes outlive a loaded machine's approval round trip, so runs get as far as ordering.
            "quote_valid_days": 100,
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
        # Generous: on a loaded machine restate-server's partitions can take half a minute to catch up.
        process.restart(timeout=180)
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


def read_record(client: httpx.Client, ingress: str, sku: str) -> SkuRecord:
    """The SKU's record through its `status` handler; a few tries, then the failure stands."""
    error = ""
    for attempt in range(3):
        try:
            response = client.get(f"{ingress}/SkuAgent/{sku}/status")
            if response.status_code == 200:
                return SkuRecord.model_validate(response.json())
            error = f"HTTP {response.status_code}: {response.text[:200]}"
        except httpx.HTTPError as e:
            error = f"{type(e).__name__}: {e}"
        time.sleep(0.5 * (attempt + 1))
    raise LookupError(error)


def records(client: httpx.Client, ingress: str, skus: list[str]) -> dict[str, SkuRecord]:
    found = {}
    for sku in skus:
        response = client.get(f"{ingress}/SkuAgent/{sku}/status")
        if response.status_code == 200:
            found[sku] = SkuRecord.model_validate(response.json())
    return found


def ended_runs(client: httpx.Client, ingress: str, skus: list[str]) -> int:
    return sum(r.stats.runs for r in records(client, ingress, skus).values())


async def read_runs(ingress: str, run_ids: list[str], unreadable: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every run's `state` view, a few at a time."""
    views: dict[str, dict[str, Any]] = {}
    limit = asyncio.Semaphore(8)

    async def read(client: httpx.AsyncClient, run_id: str) -> None:
        async with limit:
            error = ""
            for attempt in range(3):
                try:
                    response = await client.post(f"{ingress}/Replenish/{run_id}/state")
                    if response.status_code == 200:
                        views[run_id] = response.json()
                        return
                    error = f"HTTP {response.status_code}: {response.text[:200]}"
                except httpx.HTTPError as e:
                    error = f"{type(e).__name__}: {e}"
                await asyncio.sleep(0.5 * (attempt + 1))
            unreadable[run_id] = error

    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0)) as client:
        await asyncio.gather(*(read(client, run_id) for run_id in run_ids))
    return views


def gather_evidence(stack: OwnStack, client: httpx.Client, skus: list[str]) -> Evidence:
    """Everything the audit reads, from the world, the agents and Restate's own tables."""
    ingress, world, admin = stack.restate.ingress_url, stack.world.url, stack.restate.admin_url
    found: dict[str, SkuRecord] = {}
    unreadable: dict[str, str] = {}
    for sku in skus:
        try:
            found[sku] = read_record(client, ingress, sku)
        except LookupError as e:
            unreadable[sku] = str(e)
    run_ids = [run_id_of(sku, n) for sku, r in found.items() for n in range(1, r.runs_started + 1)]
    runs = asyncio.run(read_runs(ingress, run_ids, unreadable))
    run_rows = sql(
        admin,
        "SELECT target_service_key, status, completion_result, completion_failure FROM sys_invocation "
        "WHERE target_service_name = 'Replenish' AND target_handler_name = 'run'",
    )
    promises: dict[str, dict[str, Any]] = {}
    for row in sql(
        admin,
        "SELECT service_key, key, completion_success_value_utf8 FROM sys_promise "
        "WHERE service_name = 'Replenish' AND completed = true",
    ):
        value = row.get("completion_success_value_utf8")
        promises.setdefault(row["service_key"], {})[row["key"]] = json.loads(value) if value else None
    troubled = sql(
        admin,
        "SELECT target, target_handler_name, status, completion_result, completion_failure, last_failure "
        "FROM sys_invocation WHERE status IN ('backing-off', 'paused') OR completion_result = 'failure'",
    )
    closures = client.get(f"{world}/erp/closures").json()["closures"]
    return Evidence(
        skus=skus,
        records=found,
        unreadable=unreadable,
        runs=runs,
        run_invocations={row["target_service_key"]: row for row in run_rows},
        promises=promises,
        troubled=troubled,
        orders=client.get(f"{world}/admin/orders").json()["orders"],
        messages=client.get(f"{world}/admin/messages").json()["messages"],
        closed_pos={c["po_number"] for c in closures},
        now=time.time(),
    )


def summarise(records: dict[str, SkuRecord]) -> None:
    outcomes: Counter[str] = Counter()
    for record in records.values():
        outcomes.update(record.stats.by_outcome)
    print("soak: outcomes " + ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))
    reasons = Counter(
        f"{o.outcome}: {re.sub(r'[0-9.]+', 'N', o.detail)}"
        for r in records.values()
        for o in r.outcomes
        if o.outcome != "received"
    )
    for reason, n in reasons.most_common(4):
        print(f"soak:   {n:4d} x {reason}")


def settle(stack: OwnStack, client: httpx.Client, skus: list[str], timeout: float) -> None:
    """No more damage: suppliers behave, watching stops, running replenishments finish.

    With the watch off nobody calls `check`, so a SKU holding a run whose order may exist
    (`unresolved`) is checked here: that reconciles it by PO number, as its watch would have.
    """
    ingress, world = stack.restate.ingress_url, stack.world.url
    for supplier in SUPPLIERS:
        client.delete(f"{world}/faults/suppliers/{supplier}").raise_for_status()
    # One-way sends: a SKU whose queue waits behind an invocation Restate is backing off (the
    # service was just killed) would hold a request-response call past any client timeout. The
    # unwatch still runs before anything queued after it on that SKU.
    for sku in skus:
        client.post(f"{ingress}/SkuAgent/{sku}/unwatch/send").raise_for_status()
    deadline = time.monotonic() + timeout
    checked: dict[str, float] = {}  # a sent check is not answered: one per SKU per 10 s, not a pile
    while time.monotonic() < deadline:
        agents = records(client, ingress, skus)
        for sku, record in agents.items():
            due = sku not in checked or time.monotonic() - checked[sku] >= 10.0
            if record.active is None and record.unresolved is not None and due:
                client.post(f"{ingress}/SkuAgent/{sku}/check/send").raise_for_status()
                checked[sku] = time.monotonic()
        pending = [m for m in client.get(f"{world}/admin/messages").json()["messages"] if m["status"] == "pending"]
        if not pending and not any(r.active or r.unresolved for r in agents.values()):
            return
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("SOAK_RUNS", "30")))
    # More SKUs for a longer soak: runs of different SKUs overlap, so 1,000 runs fit in the time.
    parser.add_argument("--skus", type=int, default=None, help="default: 8, or one per 40 runs up to 24")
    # The damage phase; settling and the audit take at most three minutes more (15 in all).
    parser.add_argument("--max-minutes", type=float, default=float(os.environ.get("SOAK_MAX_MINUTES", "12")))
    parser.add_argument("--fault-every", type=float, default=1.5, help="seconds between faults, on average")
    parser.add_argument("--min-faults", type=int, default=int(os.environ.get("SOAK_MIN_FAULTS", "20")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", str(random.randrange(1 << 30)))))
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    n_skus = args.skus or max(8, min(24, args.runs // 40))
    skus = [f"SOAK-{i:03d}" for i in range(1, n_skus + 1)]
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
            last_report, last_done, last_cpu = 0.0, 0, stack_cpu_seconds(stack)
            while True:
                done = ended_runs(client, stack.restate.ingress_url, skus)
                elapsed = time.monotonic() - started
                if (done >= args.runs and faults >= args.min_faults) or elapsed > args.max_minutes * 60:
                    break
                if elapsed - last_report > 30:
                    # CPU per run over the last interval: flat if nothing grows with the soak's size,
                    # whatever the machine's load does to the wall-clock rate.
                    cpu = stack_cpu_seconds(stack)
                    per_run = (cpu - last_cpu) / max(done - last_done, 1)
                    print(
                        f"soak: {elapsed:4.0f}s  {done} replenishments ended, {faults} faults so far; "
                        f"{per_run:.2f} CPU-s per run lately, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    last_report, last_done, last_cpu = elapsed, done, cpu
                time.sleep(rng.expovariate(1 / args.fault_every))
                what = do_damage(stack, client, rng)
                faults += 1
                print(f"soak: {time.monotonic() - started:4.0f}s  fault: {what}", flush=True)
            print("soak: stopping the damage and letting the running replenishments finish", flush=True)
            settle(stack, client, skus, timeout=150)
            audit_started = time.monotonic()
            evidence = gather_evidence(stack, client, skus)
            summarise(evidence.records)
            verdict = audit(evidence, faults)
            print(
                f"soak: audited {len(evidence.runs)} runs, {len(evidence.orders)} orders and "
                f"{len(evidence.messages)} messages in {time.monotonic() - audit_started:.1f}s; "
                f"whole soak {time.monotonic() - started:.0f}s, {stack_cpu_seconds(stack):.0f} CPU-s",
                flush=True,
            )
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
