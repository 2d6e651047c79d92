"""The soak's audit: the world's records against what the agents and Restate say, PO by PO.

Pure: `audit(evidence)` reads only what `Evidence` holds (gathered by `bench.soak` from the
world's admin API, every SKU's `status`, every run's `state` and Restate's SQL tables), so
each check can be fed a planted bad record in a unit test and seen to fire
(`tests/soak/test_soak_audit.py`). Every step is a dictionary lookup per record: the
audit's cost grows with the number of runs, orders and messages, never with their square.

What it counts, each with a line in `problems`:

- duplicates: a PO with two orders at the suppliers; a run with orders under two POs; an
  order no run's PO names (for a SKU, run or supplier other than its own); a message the
  agents hold more often than the world sent it.
- lost: a message the world sent that was not delivered, or delivered and neither consumed
  by a run nor kept by its SKU (matched one by one, not by totals); a message a run consumed
  that Restate holds no promise for; an order a run believes the supplier holds and it does not.
- stuck: a SKU or run that cannot be read; a run id in 1..runs_started neither ended nor
  active; an active run that waits for nothing or waits past its deadline; an invocation
  Restate is backing off, has paused, or ended in failure; an order open at a supplier with no
  run following it (also counted on its own as open_orders_without_run).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from replenisher.domain.sku import SkuRecord, run_id_of

JSON = dict[str, Any]

WAIT_GRACE_SECONDS = 10.0
"""How far past its deadline a wait may still be pending: the timer fires at the deadline; this
covers a loaded machine, never a run Restate forgot."""

_PO = re.compile(r"^PO-(?P<sku>.+)-(?P<number>\d+)-(?P<revision>\d+)$")


@dataclass
class Evidence:
    skus: list[str]
    records: dict[str, SkuRecord]
    """Every SKU's record as its `status` handler returned it; a SKU missing here could not be read."""
    unreadable: dict[str, str]
    """SKU or run id -> why it could not be read."""
    runs: dict[str, JSON]
    """run id -> its `state` view ({"state": ..., "waiting": ...}), for every run id 1..runs_started read."""
    run_invocations: dict[str, JSON]
    """run id -> Restate's sys_invocation row of `Replenish/<run id>/run` (status, completion_result, ...)."""
    promises: dict[str, dict[str, Any]]
    """run id -> {promise name -> the value it was resolved with}, from Restate's sys_promise."""
    troubled: list[JSON]
    """sys_invocation rows backing off, paused, or completed with a failure."""
    orders: list[JSON]
    """Every order every supplier holds (the world's /admin/orders)."""
    messages: list[JSON]
    """Every message the world sent an agent (the world's /admin/messages)."""
    closed_pos: set[str]
    """PO numbers closed in the ERP."""
    now: float


@dataclass
class Verdict:
    runs: int
    faults: int
    pos_audited: int = 0
    duplicates: int = 0
    lost: int = 0
    stuck: int = 0
    open_orders_without_run: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"soak: runs={self.runs} faults={self.faults} pos_audited={self.pos_audited} "
            f"duplicates={self.duplicates} lost={self.lost} stuck={self.stuck} "
            f"open_orders_without_run={self.open_orders_without_run}"
        )

    @property
    def clean(self) -> bool:
        return not self.problems


def run_of_po(po_number: str) -> str | None:
    """`PO-<SKU>-<n>-<revision>` was drafted by run `replenish-<SKU>-<n>`."""
    match = _PO.match(po_number)
    return run_id_of(match["sku"], int(match["number"])) if match else None


def fingerprint(event: str, payload: JSON) -> str:
    """What identifies one message, whichever side holds it (secrets such as tokens left out)."""
    if event == "goods":
        keys = ("receipt_id", "po_number", "sku", "quantity")
    elif event == "supplier-reply":
        keys = ("po_number", "supplier", "text")
    else:
        keys = ("po_number", "approved", "up_to", "by", "note")
    body = json.dumps([event, [payload.get(k) for k in keys]], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:24]


def promised_payload(value: Any) -> JSON:
    """A message promise holds an envelope (payload, sender, arrival); older runs the bare payload."""
    if isinstance(value, dict) and isinstance(value.get("payload"), dict):
        return value["payload"]
    return value if isinstance(value, dict) else {}


def _state(view: JSON | None) -> JSON:
    return (view or {}).get("state") or {}


def _pos_of(state: JSON) -> set[str]:
    found = set()
    for part in ("po", "order"):
        if state.get(part):
            found.add(state[part]["po_number"])
    return found


def audit(evidence: Evidence, faults: int) -> Verdict:
    verdict = Verdict(runs=sum(r.stats.runs for r in evidence.records.values()), faults=faults)
    _audit_skus_and_runs(evidence, verdict)
    _audit_orders(evidence, verdict)
    _audit_messages(evidence, verdict)
    _audit_invocations(evidence, verdict)
    return verdict


def _audit_skus_and_runs(evidence: Evidence, verdict: Verdict) -> None:
    known_runs: set[str] = set()
    for sku in evidence.skus:
        record = evidence.records.get(sku)
        if record is None:
            verdict.stuck += 1
            verdict.problems.append(f"{sku}: cannot be read: {evidence.unreadable.get(sku, 'no record')}")
            continue
        active = record.active.run_id if record.active else None
        ended = 0
        for n in range(1, record.runs_started + 1):
            run_id = run_id_of(sku, n)
            known_runs.add(run_id)
            view = evidence.runs.get(run_id)
            invocation = evidence.run_invocations.get(run_id, {})
            if view is None:
                verdict.stuck += 1
                verdict.problems.append(f"{run_id}: cannot be read: {evidence.unreadable.get(run_id, 'not read')}")
                continue
            if run_id == active:
                _audit_active(run_id, view, invocation, evidence.now, verdict)
            elif invocation.get("status") == "completed" and invocation.get("completion_result") == "success":
                ended += 1
            else:
                verdict.stuck += 1
                verdict.problems.append(
                    f"{run_id}: neither ended nor active (Restate: {invocation.get('status', 'no invocation')})"
                )
        if record.stats.runs != ended:
            verdict.stuck += abs(record.stats.runs - ended)
            verdict.problems.append(f"{sku}: {ended} runs ended, its record counts {record.stats.runs} outcomes")
    for run_id in evidence.run_invocations.keys() - known_runs:
        verdict.stuck += 1
        verdict.problems.append(f"{run_id}: Restate ran it, no SKU record accounts for it")


def _audit_active(run_id: str, view: JSON, invocation: JSON, now: float, verdict: Verdict) -> None:
    waiting = view.get("waiting")
    if invocation.get("status") == "completed":
        verdict.stuck += 1
        verdict.problems.append(f"{run_id}: ended, but its SKU still holds it active")
    elif not waiting:
        verdict.stuck += 1
        verdict.problems.append(f"{run_id}: active and waits for nothing")
    elif now > waiting["deadline"] + WAIT_GRACE_SECONDS:
        verdict.stuck += 1
        late = now - waiting["deadline"]
        verdict.problems.append(f"{run_id}: {waiting['tool']} is {late:.1f}s past its deadline")


def _audit_orders(evidence: Evidence, verdict: Verdict) -> None:
    # Which runs name which PO (an adopting run names the PO of the run it follows up).
    naming: dict[str, list[str]] = {}
    for run_id, view in evidence.runs.items():
        for po in _pos_of(_state(view)):
            naming.setdefault(po, []).append(run_id)
    active = {r.active.run_id for r in evidence.records.values() if r.active}
    per_po = Counter(o["po_number"] for o in evidence.orders)
    for po, n in per_po.items():
        if n > 1:
            verdict.duplicates += n - 1
            verdict.problems.append(f"PO {po} has {n} orders at the suppliers")
    held: dict[str, JSON] = {o["po_number"]: o for o in evidence.orders}
    per_run: dict[str, set[str]] = {}
    for order in evidence.orders:
        po = order["po_number"]
        owner = run_of_po(po)
        if owner is not None:
            per_run.setdefault(owner, set()).add(po)
        runs = naming.get(po, [])
        state = _state(evidence.runs.get(owner)) if owner else {}
        placed_by = state.get("po") or state.get("order") or {}
        if owner not in runs or order["sku"] != state.get("sku") or order["supplier"] != placed_by.get("supplier"):
            verdict.duplicates += 1
            verdict.problems.append(
                f"order {po} ({order['sku']} at {order['supplier']}) is not a PO its run placed "
                f"(runs naming it: {runs or 'none'})"
            )
            continue
        if order.get("cancelled_at") is None and po not in evidence.closed_pos:
            if not any(r in active for r in runs):
                verdict.open_orders_without_run += 1
                verdict.stuck += 1
                outcome = state.get("order_status", "?")
                verdict.problems.append(
                    f"order {po} is open at {order['supplier']} and no run follows it ({owner}: order {outcome})"
                )
    for run_id, pos in per_run.items():
        if len(pos) > 1:
            verdict.duplicates += len(pos) - 1
            verdict.problems.append(f"{run_id} has orders under {len(pos)} POs: {sorted(pos)}")
    for run_id, view in evidence.runs.items():
        state = _state(view)
        order = state.get("order")
        if order and state.get("order_status") in ("placed", "cancelled") and order["po_number"] not in held:
            verdict.lost += 1
            verdict.problems.append(f"{run_id}: believes {order['supplier']} holds {order['po_number']}; it does not")
    verdict.pos_audited = len(held.keys() | naming.keys())


def _audit_messages(evidence: Evidence, verdict: Verdict) -> None:
    held: Counter[str] = Counter()
    where: dict[str, str] = {}

    def hold(event: str, payload: JSON, place: str) -> None:
        fp = fingerprint(event, payload)
        held[fp] += 1
        where.setdefault(fp, place)

    for run_id, view in evidence.runs.items():
        consumed: dict[str, int] = _state(view).get("consumed") or {}
        promises = evidence.promises.get(run_id, {})
        for event, count in consumed.items():
            for seq in range(count):
                name = f"{event}-{seq}"
                if name not in promises:
                    verdict.lost += 1
                    verdict.problems.append(f"{run_id} consumed {name}, which Restate holds no promise for")
                else:
                    hold(event, promised_payload(promises[name]), f"consumed by {run_id} as {name}")
    for sku, record in evidence.records.items():
        for kept in record.kept:
            hold(kept.event, kept.payload, f"kept by {sku}")
        if record.kept_overflow:
            # Fell off the bounded list: they cannot be matched one by one any more.
            verdict.lost += record.kept_overflow
            verdict.problems.append(f"{sku}: {record.kept_overflow} kept messages fell off its record unmatched")
        if record.active is not None:
            consumed = _state(evidence.runs.get(record.active.run_id)).get("consumed") or {}
            for message in record.active.routed:
                if message.seq >= consumed.get(message.event, 0):
                    hold(message.event, message.payload, f"routed to {record.active.run_id}, not read yet")
    for message in evidence.messages:
        label = f"{message['event']} about {message['po_number']} for {message['sku']} (world #{message['seq']})"
        if message["status"] != "delivered":
            verdict.lost += 1
            verdict.problems.append(f"{label} was never delivered: {message['status']}, {message.get('reason')}")
            continue
        fp = fingerprint(message["event"], message["payload"])
        if held[fp] > 0:
            held[fp] -= 1
        else:
            verdict.lost += 1
            verdict.problems.append(f"{label} was delivered, but no run consumed it and its SKU does not keep it")
    for fp, extra in held.items():
        if extra > 0:
            verdict.duplicates += extra
            verdict.problems.append(f"a message {where[fp]} is held {extra} more time(s) than the world sent it")


def _audit_invocations(evidence: Evidence, verdict: Verdict) -> None:
    for row in evidence.troubled:
        if row.get("target_handler_name") == "tick" and "cancel" in (row.get("completion_failure") or "").lower():
            continue  # the watch's next tick, cancelled by unwatch: that is how a watch stops
        verdict.stuck += 1
        why = row.get("last_failure") or row.get("completion_failure") or ""
        verdict.problems.append(f"{row.get('target')}: {row.get('status')} {row.get('completion_result') or ''} {why}")
