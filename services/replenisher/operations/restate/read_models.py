"""The SQL read models: what the agents saved, and what Restate recorded of their calls.

Read from the admin API's SQL introspection (`state`, `sys_invocation`, `sys_journal`,
`sys_journal_events`, `sys_promise`), many agents at once, whether the service answers or
not. Objects, state keys, targets and promise names come from `loop/names.py`, the module the
handlers that write them use.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from replenisher.domain.documents import Sender
from replenisher.domain.security import without_secrets
from replenisher.domain.sku import SkuRecord
from replenisher.domain.state import State
from replenisher.loop import names
from replenisher.operations.restate.errors import NotFound
from replenisher.operations.restate.http import RestateHttp, among, literal, valid_sku
from replenisher.timeline.journal import (
    JournalEntry,
    TransientFailure,
    epoch,
    invocation,
    journal_entries,
    transient_failures,
)
from replenisher.timeline.model import Decision, Invocation, Waiting

APPROVAL = "approval"  # the message kind whose promises hold the manager's answers


class RunView(BaseModel):
    state: State | None = None
    waiting: Waiting | None = None


def _state_of(service: str) -> str:
    return f"SELECT service_key, value_utf8 FROM state WHERE service_name = {literal(service)} "


def _run_targets(run_ids: list[str]) -> str:
    return among([names.target(names.REPLENISH, r, names.RUN) for r in run_ids])


# --- what the agents saved ------------------------------------------------------------------


async def stored_sku_record(http: RestateHttp, sku: str) -> SkuRecord:
    """A SKU's record as its agent last saved it."""
    sku = valid_sku(sku)
    rows = await http.sql(
        f"SELECT value_utf8 FROM state WHERE service_name = {literal(names.SKU_AGENT)} "
        f"AND key = {literal(names.SKU_RECORD)} AND service_key = {literal(sku)}"
    )
    if not rows or not rows[0].get("value_utf8"):
        raise NotFound(f"unknown SKU {sku}: no agent for it in Restate's storage")
    return SkuRecord.model_validate_json(rows[0]["value_utf8"])


async def stored_run_view(http: RestateHttp, run_id: str) -> RunView:
    """A run's state and wait as it last saved them (its secrets dropped)."""
    rows = await http.sql(
        f"SELECT key, value_utf8 FROM state WHERE service_name = {literal(names.REPLENISH)} "
        f"AND service_key = {literal(run_id)} AND key IN {among((names.STATE, names.WAITING))}"
    )
    values = {r["key"]: r["value_utf8"] for r in rows if r.get("value_utf8")}
    state = State.model_validate_json(values[names.STATE]) if names.STATE in values else None
    waiting = Waiting.model_validate_json(values[names.WAITING]) if names.WAITING in values else None
    return RunView(state=without_secrets(state) if state else None, waiting=waiting)


async def sku_records(http: RestateHttp) -> list[SkuRecord]:
    rows = await http.sql(_state_of(names.SKU_AGENT) + f"AND key = {literal(names.SKU_RECORD)}")
    records = [SkuRecord.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")]
    return sorted(records, key=lambda r: r.sku)


class SkuRecordPage(BaseModel):
    records: list[SkuRecord]
    matching: int = Field(description="the records whose SKU holds the search, on every page")


async def sku_records_page(http: RestateHttp, search: str, descending: bool, limit: int, offset: int) -> SkuRecordPage:
    """`limit` SKU records from `offset`, by SKU, of those whose SKU holds `search` (any case), and
    how many hold it: Restate reads, sends and we parse only the page's records, not every SKU's."""
    needle = search.strip().lower()
    where = f"WHERE service_name = {literal(names.SKU_AGENT)} AND key = {literal(names.SKU_RECORD)} "
    if needle:
        # strpos, not LIKE: a SKU's `_` would be LIKE's wildcard.
        where += f"AND strpos(lower(service_key), {literal(needle)}) > 0 "
    counted = await http.sql(f"SELECT COUNT(*) AS n FROM state {where}")
    order = "DESC" if descending else "ASC"
    rows = await http.sql(
        f"SELECT service_key, value_utf8 FROM state {where}ORDER BY service_key {order} LIMIT {limit} OFFSET {offset}"
    )
    records = [SkuRecord.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")]
    return SkuRecordPage(records=records, matching=int(counted[0]["n"]) if counted else 0)


async def sku_records_of(http: RestateHttp, skus: list[str]) -> list[SkuRecord]:
    if not skus:
        return []
    keys = among([valid_sku(s) for s in skus])
    rows = await http.sql(
        _state_of(names.SKU_AGENT) + f"AND key = {literal(names.SKU_RECORD)} AND service_key IN {keys}"
    )
    return [SkuRecord.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")]


async def waiting_runs(http: RestateHttp) -> dict[str, Waiting]:
    rows = await http.sql(_state_of(names.REPLENISH) + f"AND key = {literal(names.WAITING)}")
    return {r["service_key"]: Waiting.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")}


async def run_states(http: RestateHttp, run_ids: list[str]) -> dict[str, State]:
    if not run_ids:
        return {}
    rows = await http.sql(
        _state_of(names.REPLENISH) + f"AND key = {literal(names.STATE)} AND service_key IN {among(run_ids)}"
    )
    return {r["service_key"]: State.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")}


# --- what Restate recorded of their calls ------------------------------------------------------


async def waiting_since(http: RestateHttp, invocation_ids: dict[str, str]) -> dict[str, float]:
    """When each run (run id -> its `run` invocation's id) last started waiting: its last
    `waiting` state write in the journal.

    Read by invocation id, not through a join with `sys_invocation`: Restate looks up the given
    invocations' entries instead of scanning every journal it keeps (a cost that grows with all
    the runs on record, not with the page asked for)."""
    if not invocation_ids:
        return {}
    run_of = {invocation_id: run for run, invocation_id in invocation_ids.items()}
    rows = await http.sql(
        "SELECT id, max(appended_at) AS since FROM sys_journal "
        f"WHERE id IN {among(sorted(run_of))} AND entry_type = 'Command: SetState' "
        f"AND entry_lite_json LIKE {literal(f'%{json.dumps(names.WAITING)}%')} GROUP BY id"
    )
    return {run_of[r["id"]]: t for r in rows if r.get("id") in run_of and (t := epoch(r.get("since"))) is not None}


async def run_invocations(http: RestateHttp, run_ids: list[str]) -> dict[str, Invocation]:
    if not run_ids:
        return {}
    rows = await http.sql(
        "SELECT id, target_service_key, status, created_at, completed_at, retry_count, last_failure, "
        "last_failure_error_code, last_failure_related_command_name, last_start_at, next_retry_at "
        f"FROM sys_invocation WHERE target IN {_run_targets(run_ids)}"
    )
    return {r["target_service_key"]: invocation(r) for r in rows}


async def journal(http: RestateHttp, invocation_id: str) -> list[JournalEntry]:
    rows = await http.sql(
        "SELECT index, entry_type, name, appended_at, entry_lite_json FROM sys_journal "
        f"WHERE id = {literal(invocation_id)} ORDER BY index"
    )
    return journal_entries(rows)


async def failures(http: RestateHttp, invocation_id: str) -> list[TransientFailure]:
    rows = await http.sql(
        "SELECT after_journal_entry_index, appended_at, event_type, event_json FROM sys_journal_events "
        f"WHERE id = {literal(invocation_id)}"
    )
    return transient_failures(rows)


async def sku_agent_failures(http: RestateHttp, sku: str) -> list[TransientFailure]:
    """Failed attempts of the SKU agent's invocations (check, deliver, ...) still on record.

    The agent's invocations first, then their events by id: a join would make Restate read
    every invocation's events it keeps, whatever the SKU."""
    ids = await http.sql(
        f"SELECT id FROM sys_invocation WHERE target_service_name = {literal(names.SKU_AGENT)} "
        f"AND target_service_key = {literal(valid_sku(sku))}"
    )
    if not ids:
        return []
    rows = await http.sql(
        "SELECT after_journal_entry_index, appended_at, event_type, event_json FROM sys_journal_events "
        f"WHERE id IN {among(sorted(str(r['id']) for r in ids))}"
    )
    return transient_failures(rows)


async def approval_messages(http: RestateHttp, run_id: str) -> list[Decision]:
    """The manager's answers the run received, from its durable promises (tokens dropped)."""
    rows = await http.sql(
        "SELECT key, completion_success_value_utf8 AS value FROM sys_promise "
        f"WHERE service_name = {literal(names.REPLENISH)} AND service_key = {literal(run_id)} "
        f"AND key LIKE {literal(names.promise_prefix(APPROVAL) + '%')} AND completed = true"
    )
    decisions = []
    for row in rows:
        decision = decision_of(str(row["key"]), row.get("value"))
        if decision is not None:
            decisions.append(decision)
    return sorted(decisions, key=lambda d: d.round)


def channel_of(sender: Any) -> str | None:
    """Who carried a message, as the record names it (`operator (said: manager)` for a stated one)."""
    if isinstance(sender, str):
        return sender[:200]
    try:
        return Sender.model_validate(sender).label
    except ValidationError:
        party = sender.get("party") if isinstance(sender, dict) else None
        return str(party)[:200] if party is not None else None


def decision_of(key: str, value: Any) -> Decision | None:
    """An approval message as a Decision. The message is the payload itself, or (once the
    sender is recorded) an envelope with `payload`, `sender` and `arrived_at`."""
    promise = names.parse_promise(key)
    try:
        body = json.loads(value) if isinstance(value, str) else value
    except (ValueError, TypeError):
        return None
    if promise is None or not isinstance(body, dict):
        return None
    payload = body.get("payload") if isinstance(body.get("payload"), dict) else body
    channel = channel_of(body.get("sender"))
    up_to = payload.get("up_to")
    arrived = body.get("arrived_at")
    return Decision(
        round=promise.seq,
        po_number=str(payload["po_number"]) if payload.get("po_number") else None,
        approved=payload["approved"] if isinstance(payload.get("approved"), bool) else None,
        up_to=float(up_to) if isinstance(up_to, int | float) else None,
        by=str(payload["by"])[:200] if payload.get("by") else None,
        note=str(payload.get("note") or "")[:2000],
        channel=str(channel)[:100] if channel else None,
        at=float(arrived) if isinstance(arrived, int | float) else None,
    )
