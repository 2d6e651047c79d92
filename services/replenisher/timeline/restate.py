"""What Restate knows, read over its two doors: the ingress (the agents' own handlers) and the
admin API's SQL introspection (sys_invocation, sys_journal, sys_journal_events, state).

One small async client for the CLI and the console. Errors come out as three exceptions a
person can act on: Restate is not reachable, the thing asked for does not exist, or Restate
refused the request (with its message).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from replenisher.domain.documents import Sku
from replenisher.domain.sku import SkuRecord
from replenisher.domain.state import State
from replenisher.timeline.journal import (
    JournalEntry,
    Row,
    TransientFailure,
    epoch,
    invocation,
    journal_entries,
    sql_time,
    transient_failures,
)
from replenisher.timeline.model import Invocation, Waiting

_SKU = TypeAdapter(Sku)
_TIMEOUT = httpx.Timeout(30.0, connect=3.0)


class OperatorError(Exception):
    """Something a person must be told about, in one line."""


class Unreachable(OperatorError):
    pass


class NotFound(OperatorError):
    pass


class Refused(OperatorError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class RunView(BaseModel):
    state: State | None = None
    waiting: Waiting | None = None


def valid_sku(sku: str) -> str:
    """A SKU as the documents define it; anything else never reaches a URL or a query."""
    try:
        return _SKU.validate_python(sku)
    except ValidationError:
        raise NotFound(f"{sku!r} is not a valid SKU (letters, digits, '.', '_' and '-')") from None


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def run_id_of(sku: str, number: int) -> str:
    return f"replenish-{sku}-{number}"


class RestateClient:
    def __init__(self, ingress_url: str, admin_url: str, client: httpx.AsyncClient | None = None) -> None:
        self.ingress_url = ingress_url.rstrip("/")
        self.admin_url = admin_url.rstrip("/")
        self._client = client or httpx.AsyncClient(timeout=_TIMEOUT)
        self._owns_client = client is None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> RestateClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- HTTP --------------------------------------------------------------------------

    async def _request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._client.request(method, url, **kwargs)
        except httpx.TransportError as e:
            base = "/".join(url.split("/", 3)[:3])
            raise Unreachable(f"cannot reach Restate's {what} at {base} ({type(e).__name__}); is the stack up?") from e

    async def ingress(self, method: str, path: str, body: Any = None, idempotency_key: str | None = None) -> Any:
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None or method == "POST":
            kwargs["json"] = body
        response = await self._request(method, f"{self.ingress_url}{path}", "ingress", **kwargs)
        if response.is_error:
            message = _message(response)
            if response.status_code == 404:
                raise NotFound(message)
            raise Refused(response.status_code, message)
        return response.json() if response.content else None

    async def sql(self, query: str) -> list[Row]:
        url = f"{self.admin_url}/query"
        headers = {"accept": "application/json"}
        response = await self._request("POST", url, "admin API", json={"query": query}, headers=headers)
        if response.is_error:
            raise Refused(response.status_code, f"query failed: {_message(response)}")
        rows: list[Row] = response.json()["rows"]
        return rows

    # --- the agents, over ingress -------------------------------------------------------

    async def sku_status(self, sku: str) -> SkuRecord:
        sku = valid_sku(sku)
        try:
            body = await self.ingress("GET", f"/SkuAgent/{sku}/status")
        except NotFound as e:
            raise NotFound(f"unknown SKU {sku}: {e}") from None
        return SkuRecord.model_validate(body)

    async def run_view(self, run_id: str) -> RunView:
        return RunView.model_validate(await self.ingress("POST", f"/Replenish/{run_id}/state"))

    async def deliver(
        self, sku: str, event: str, payload: dict[str, Any], idempotency_key: str | None = None
    ) -> dict[str, Any]:
        sku = valid_sku(sku)
        body = {"event": event, "payload": payload}
        answer: dict[str, Any] = await self.ingress("POST", f"/SkuAgent/{sku}/deliver", body, idempotency_key)
        return answer

    # --- many agents at once, over SQL --------------------------------------------------

    async def sku_records(self) -> list[SkuRecord]:
        rows = await self.sql(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = 'SkuAgent' AND key = 'record'"
        )
        records = [SkuRecord.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")]
        return sorted(records, key=lambda r: r.sku)

    async def waiting_runs(self) -> dict[str, Waiting]:
        rows = await self.sql(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = 'Replenish' AND key = 'waiting'"
        )
        return {r["service_key"]: Waiting.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")}

    async def run_states(self, run_ids: list[str]) -> dict[str, State]:
        if not run_ids:
            return {}
        keys = ", ".join(literal(r) for r in run_ids)
        rows = await self.sql(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = 'Replenish' AND key = 'state' "
            f"AND service_key IN ({keys})"
        )
        return {r["service_key"]: State.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")}

    async def waiting_since(self, run_ids: list[str]) -> dict[str, float]:
        """When each run last started waiting: its last `waiting` state write in the journal."""
        if not run_ids:
            return {}
        targets = ", ".join(literal(f"Replenish/{r}/run") for r in run_ids)
        rows = await self.sql(
            "SELECT i.target_service_key AS run, max(j.appended_at) AS since FROM sys_journal j "
            "JOIN sys_invocation i ON j.id = i.id "
            f"WHERE i.target IN ({targets}) AND j.entry_type = 'Command: SetState' "
            "AND j.entry_lite_json LIKE '%\"waiting\"%' GROUP BY i.target_service_key"
        )
        return {r["run"]: t for r in rows if (t := epoch(r.get("since"))) is not None}

    async def run_invocations(self, run_ids: list[str]) -> dict[str, Invocation]:
        if not run_ids:
            return {}
        targets = ", ".join(literal(f"Replenish/{r}/run") for r in run_ids)
        rows = await self.sql(
            "SELECT id, target_service_key, status, created_at, completed_at, retry_count, last_failure, "
            f"next_retry_at FROM sys_invocation WHERE target IN ({targets})"
        )
        return {r["target_service_key"]: invocation(r) for r in rows}

    # --- one run's journal --------------------------------------------------------------

    async def journal(self, invocation_id: str) -> list[JournalEntry]:
        rows = await self.sql(
            "SELECT index, entry_type, name, appended_at, entry_lite_json FROM sys_journal "
            f"WHERE id = {literal(invocation_id)} ORDER BY index"
        )
        return journal_entries(rows)

    async def failures(self, invocation_id: str) -> list[TransientFailure]:
        rows = await self.sql(
            "SELECT after_journal_entry_index, appended_at, event_type, event_json FROM sys_journal_events "
            f"WHERE id = {literal(invocation_id)}"
        )
        return transient_failures(rows)

    async def sku_agent_failures(self, sku: str) -> list[TransientFailure]:
        """Failed attempts of the SKU agent's invocations (check, deliver, ...) still on record."""
        rows = await self.sql(
            "SELECT e.after_journal_entry_index, e.appended_at, e.event_type, e.event_json "
            "FROM sys_journal_events e JOIN sys_invocation i ON e.id = i.id "
            f"WHERE i.target_service_name = 'SkuAgent' AND i.target_service_key = {literal(valid_sku(sku))}"
        )
        return transient_failures(rows)

    async def first_command_after(self, t: float) -> float | None:
        """The first journal command any invocation wrote after `t`: the service was up then."""
        rows = await self.sql(
            "SELECT min(appended_at) AS t FROM sys_journal "
            f"WHERE entry_type LIKE 'Command:%' AND appended_at > TIMESTAMP {literal(sql_time(t))}"
        )
        return epoch(rows[0].get("t")) if rows else None


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        return response.text.strip() or response.reason_phrase
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)
