"""Old shapes of stored state, brought up to date when they are read.

A SKU agent lives for years, and Restate keeps its record across deployments: the newest
code reads what older code wrote. Each stored document carries `schema_version`; reading
one applies the steps from its version to the current one, in order. A step takes the raw
JSON of version N and returns version N+1. Documents without a version are version 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Raw = dict[str, Any]
Step = Callable[[Raw], Raw]


def migrate(raw: Any, steps: dict[int, Step], current: int, kind: str) -> Any:
    if not isinstance(raw, dict):
        return raw
    version = raw.get("schema_version", 1)
    if version > current:
        raise ValueError(f"{kind} has schema version {version}, newer than this code knows ({current})")
    raw = dict(raw)
    while version < current:
        raw = steps[version](raw)
        version += 1
        raw["schema_version"] = version
    return raw


def _sku_v1_to_v2(raw: Raw) -> Raw:
    # v2 files each kept message under the PO it is about, so reconciliation can find them.
    kept = [{**m, "po_number": (m.get("payload") or {}).get("po_number")} for m in raw.get("kept", [])]
    return {**raw, "kept": kept}


def _sku_v2_to_v3(raw: Raw) -> Raw:
    # v3 lets a supplier's reliability recover with time since its last judged order; v2 did
    # not keep that time, so the last time the supplier was seen stands in for it.
    memory = dict(raw.get("memory") or {})
    suppliers = {
        name: {**m, "judged_at": m.get("last_seen") if m.get("judged_orders") else None}
        for name, m in (memory.get("suppliers") or {}).items()
    }
    return {**raw, "memory": {**memory, "suppliers": suppliers}} if memory else raw


def _state_v1_to_v2(raw: Raw) -> Raw:
    # v1 remembered only whether the last status check failed; v2 counts them for its backoff.
    failed = raw.pop("last_status_check_failed", False)
    return {**raw, "failed_status_checks": 1 if failed else 0}


def _state_v2_to_v3(raw: Raw) -> Raw:
    # v3 keeps the run's clock for the rules that depend on time (a quote's validity): the
    # latest time a v2 state recorded is the best reading of it.
    times = [raw.get("started_at"), raw.get("ordered_at"), raw.get("last_chase_at")]
    return {**raw, "now": max(t for t in times if isinstance(t, int | float))}


def _state_v3_to_v4(raw: Raw) -> Raw:
    # v4 counts waits on a site calendar fixed at the run's start. A run written before had
    # none: every day counted whole from its start, so its deadlines stay where they were.
    if "clock" in raw:
        return raw
    started_at = raw.get("started_at", 0.0)
    clock = {
        "calendar": {"working_days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]},
        "day_seconds": raw.get("day_seconds", 86_400.0),
        "origin": {"wall": started_at, "calendar": started_at},
    }
    return {**raw, "clock": clock}


def _state_v4_to_v5(raw: Raw) -> Raw:
    # v5 fixes the approval policy into the run. A run written before had none: no
    # reminders, no backup approver, so it ends as it would have.
    if "approval_policy" in raw:
        return raw
    return {**raw, "approval_policy": {"reminders": [], "backup_approver": None}}


def _state_v5_to_v6(raw: Raw) -> Raw:
    # v6 records the decider fixed at the run's start. A run written before did not pin one:
    # it went on with whichever decider the service had, and its state says so (None).
    return {**raw, "decider": raw.get("decider")}


def _old_entries(events: list[tuple[str, float, str | None]], first_seq: int) -> list[Raw]:
    """Entries of the security log (v4 record, v7 state) from events kept before sources and
    counts were: source unknown, one event each, except the same text again collapses."""
    entries: list[Raw] = []
    for n, (what, at, run_id) in enumerate(events):
        what = what[:300]
        same = next((e for e in entries if e["what"] == what and e["run_id"] == run_id), None)
        if same is not None:
            entries.remove(same)
            entries.append({**same, "count": same["count"] + 1, "last_at": max(same["last_at"], at)})
            continue
        entries.append(
            {
                "seq": first_seq + n,
                "source": "unknown",
                "what": what,
                "count": 1,
                "first_at": at,
                "last_at": at,
                "run_id": run_id,
            }
        )
    return entries


def _sku_v3_to_v4(raw: Raw) -> Raw:
    # v4's security log collapses repeats and counts what it drops per source. v3 kept the
    # latest 50 events without a source, and a total: the rest were dropped, source unknown.
    old = raw.get("security")
    if not isinstance(old, dict) or "dropped" in old:
        return raw
    recent = [(e["what"], e["at"], e.get("run_id")) for e in old.get("recent", [])]
    total = max(int(old.get("total", 0)), len(recent))
    dropped = total - len(recent)
    log = {
        "total": total,
        "recent": _old_entries(recent, dropped + 1),
        "dropped": {"unknown": dropped} if dropped else {},
    }
    return {**raw, "security": log}


SKU_RECORD_STEPS: dict[int, Step] = {1: _sku_v1_to_v2, 2: _sku_v2_to_v3, 3: _sku_v3_to_v4}


def _state_v6_to_v7(raw: Raw) -> Raw:
    # v7 keeps a bounded security log with an exact total instead of the first 50 texts. A v6
    # run's events had no source or time: the run's clock dates them. Those past the 50th were
    # never kept, so nothing can count them now.
    if "security" in raw:
        return raw
    at = raw.get("now") or raw.get("started_at") or 0.0
    events = [(str(what), at, None) for what in raw.get("security_events") or []]
    rest = {k: v for k, v in raw.items() if k != "security_events"}
    return {**rest, "security": {"total": len(events), "recent": _old_entries(events, 1), "dropped": {}}}


def _state_v7_to_v8(raw: Raw) -> Raw:
    # v8 may bind approvals to people of an authority matrix fixed at the run's start, each
    # signature kept on the approval. A run written before had no matrix: no signatures.
    approval = raw.get("approval")
    if isinstance(approval, dict):
        raw = {**raw, "approval": {**approval, "signatures": approval.get("signatures", [])}}
    return {**raw, "people_matrix": raw.get("people_matrix", False)}


STATE_STEPS: dict[int, Step] = {
    1: _state_v1_to_v2,
    2: _state_v2_to_v3,
    3: _state_v3_to_v4,
    4: _state_v4_to_v5,
    5: _state_v5_to_v6,
    6: _state_v6_to_v7,
    7: _state_v7_to_v8,
}
