"""What Restate knows, read over its two doors: the ingress (the agents' own handlers) and the
admin API's SQL introspection (sys_invocation, sys_journal, sys_journal_events, state).

One small async client for the CLI and the console. Errors come out as exceptions a person
can act on: Restate is not reachable, the service is down (Restate answers, the deployment
does not), the thing asked for does not exist, or Restate refused the request (with its
message). A call is not left hanging on a dead service: when ingress has not answered
within `patience`, Restate's own records say whether the service is down; if it is, a read
gives up at once (and the agents' state is read from Restate's storage instead), and a
write, which Restate has accepted and will run when the service is back, says so with its
invocation id (`Accepted`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, Field, ValidationError

from replenisher.domain.documents import SKU_ID, Sender
from replenisher.domain.security import without_secrets
from replenisher.domain.sku import SkuRecord, split_run_id
from replenisher.domain.state import State
from replenisher.loop import names
from replenisher.timeline.build import is_outage_text
from replenisher.timeline.format import clock
from replenisher.timeline.journal import (
    JournalEntry,
    Row,
    TransientFailure,
    epoch,
    error_text,
    invocation,
    journal_entries,
    sql_time,
    transient_failures,
)
from replenisher.timeline.model import Decision, Invocation, Waiting

_TIMEOUT = httpx.Timeout(30.0, connect=3.0)
HEALTH_PROBE_SECONDS = 2.0  # how long the agents' deployment may take to answer its health check
PATIENCE = 1.5  # seconds an ingress call may take before Restate is asked whether the service is down
# An attempt still running this long after it started was answered by the service: a refused
# one (connection refused, broken pipe) fails within milliseconds.
ANSWERED_ATTEMPT_SECONDS = 1


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


class Health(BaseModel):
    """Whether the replenisher service answers Restate, from Restate's own records."""

    service_down: bool = False
    since: float | None = Field(default=None, description="the first refused attempt of this outage")
    error: str | None = Field(default=None, description="the last refusal, one line")
    waiting_invocations: int = Field(default=0, description="invocations Restate holds until the service is back")
    next_attempt_at: float | None = None
    found_at: float | None = Field(
        default=None, description="when a look found it down with nothing in flight to date the outage"
    )

    def dated(self) -> str:
        """Since when, or when it was found down when nothing in flight can tell: for "is down…"."""
        if self.since is not None:
            return f" since {clock(self.since)}"
        if self.found_at is not None:
            return f", found so at {clock(self.found_at)} with nothing in flight to tell since when"
        return ""

    @property
    def reason(self) -> str:
        """The last refusal, to end a sentence with (its own full stop dropped)."""
        return (self.error or "").rstrip(". ") or "its attempts are refused"

    def line(self) -> str:
        if not self.service_down:
            return "the service answers"
        since = self.dated()
        n = self.waiting_invocations
        held = f"; Restate holds {n} invocation{'s' * (n != 1)} until it is back" * bool(n)
        # Not in parentheses: the error often has its own, e.g. "… does not answer (ConnectError)".
        return f"the replenisher service is down{since} — Restate answers, the service does not: {self.reason}{held}"


def paused_keys(record: SkuRecord) -> list[str]:
    """Where a paused call of this SKU can be: its agent, its active run, the run whose order is
    unresolved, and its recent runs (a run's last calls, e.g. `RunArchive.keep`, outlive it)."""
    runs = [record.active.run_id] if record.active else []
    if record.unresolved is not None:
        runs.append(record.unresolved.run_id)
    runs += [outcome.run_id for outcome in reversed(record.outcomes)]
    return [record.sku, *dict.fromkeys(runs)]


# The SkuAgent's shared handlers (reads that run beside its exclusive calls); kept equal to the
# object's own definition by a test, so this module needs no Restate SDK.
AGENT_SHARED_HANDLERS = frozenset({"status"})


class PausedCall(BaseModel):
    """An invocation Restate paused: it runs again only when a person resumes it.

    Restate pauses an invocation whose retries ran out (`default-retry-policy`, e.g. a service
    away longer than that), one whose journal the code no longer matches, or one an operator
    paused. A paused exclusive call of a SKU's agent holds the SKU: every later call to it
    that is not a read waits behind it.
    """

    id: str
    target: str = Field(description="service/key/handler, e.g. SkuAgent/SKU-1/check")
    since: float | None = Field(default=None, description="when Restate last changed it (it paused then)")
    error: str | None = Field(default=None, description="its last failure, one line")
    code: str | None = None

    @property
    def handler(self) -> str:
        return self.target.rsplit("/", 1)[-1]

    @property
    def on_agent(self) -> bool:
        """A call to a SKU's agent (its key is the SKU), of any kind."""
        return self.target.startswith("SkuAgent/")

    @property
    def holds_sku(self) -> bool:
        """An exclusive call to a SKU's agent: every later call to it that is not a read waits
        behind it. A paused shared read (`status`) holds nothing."""
        return self.on_agent and self.handler not in AGENT_SHARED_HANDLERS

    @property
    def sku(self) -> str:
        """The SKU it belongs to: the agent's key, or the SKU in a run's id (replenish-SKU-N)."""
        key = self.target.split("/", 2)[1]
        return key if self.on_agent else split_run_id(key)[0]

    def when_and_why(self) -> str:
        """` at <time> after <code> <error>`, as far as Restate knows them."""
        since = f" at {clock(self.since)}" if self.since is not None else ""
        code = f"{self.code} " if self.code else ""
        return since + (f" after {code}{self.error}" if self.error else "")

    def line(self) -> str:
        return f"Restate paused `{self.handler}` ({self.target}, invocation {self.id}){self.when_and_why()}"

    def remedy(self) -> str:
        return (
            f"it runs again only when resumed: fix the cause, then `restate invocations resume {self.id}` "
            f"(`restate invocations describe {self.id}` shows the whole error)"
        )


class Blocked(OperatorError):
    """The call waits behind a paused invocation of the same SKU: it runs once that one is resumed."""

    def __init__(self, what: str, invocation_id: str | None, paused: PausedCall) -> None:
        ident = f" as invocation {invocation_id}" if invocation_id else ""
        held = f"Restate holds {what}{ident}, queued" if invocation_id else f"{what} is queued"
        super().__init__(f"{held} behind a paused call: {paused.line()}; {paused.remedy()}")
        self.what = what
        self.invocation_id = invocation_id
        self.paused = paused


class ServiceDown(OperatorError):
    """Restate is up, but its attempts to reach the replenisher service are refused."""

    def __init__(self, health: Health) -> None:
        super().__init__(health.line())
        self.health = health


class Accepted(OperatorError):
    """Restate accepted the call, and runs it when the service is back: not a failure."""

    def __init__(self, what: str, invocation_id: str | None, health: Health) -> None:
        ident = f" as invocation {invocation_id}" if invocation_id else ""
        since = health.dated()
        super().__init__(
            f"Restate accepted {what}{ident}; the replenisher service is down{since}, "
            "so it will run when the service is back"
        )
        self.what = what
        self.invocation_id = invocation_id
        self.health = health


class RunView(BaseModel):
    state: State | None = None
    waiting: Waiting | None = None


def valid_sku(sku: str) -> str:
    """A SKU as the documents define it; anything else never reaches a URL or a query."""
    try:
        return SKU_ID.validate_python(sku)
    except ValidationError:
        raise NotFound(f"{sku!r} is not a valid SKU (letters, digits, '.', '_' and '-')") from None


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _is_ours(row: Row, target: str, began: float) -> bool:
    """Whether an invocation is the call of ours to `target` that started at `began`."""
    return row.get("target") == target and (epoch(row.get("created_at")) or 0.0) >= began - 1


class RestateClient:
    def __init__(
        self,
        ingress_url: str,
        admin_url: str,
        client: httpx.AsyncClient | None = None,
        patience: float = PATIENCE,
    ) -> None:
        self.ingress_url = ingress_url.rstrip("/")
        self.admin_url = admin_url.rstrip("/")
        self._client = client or httpx.AsyncClient(timeout=_TIMEOUT)
        self._owns_client = client is None
        self.patience = patience
        self.degraded: Health | None = None
        """Set once a read found the service down and fell back to Restate's storage."""

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
            raise Unreachable(
                f"Restate is unreachable: cannot reach its {what} at {base} ({type(e).__name__}); is the stack up?"
            ) from e

    async def ingress(self, method: str, path: str, body: Any = None, idempotency_key: str | None = None) -> Any:
        """Call a handler. With an idempotency key the call is a write Restate keeps: if the
        service is down it raises `Accepted` (it will run later), else `ServiceDown`."""
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None or method == "POST":
            kwargs["json"] = body
        if self.degraded is not None:
            # Known down: do not leave one more call hanging in Restate for nothing.
            if idempotency_key is not None:
                raise await self._held(path, body, idempotency_key, self.degraded)
            raise ServiceDown(self.degraded)
        began = time.time()
        call = asyncio.ensure_future(self._request(method, f"{self.ingress_url}{path}", "ingress", **kwargs))
        try:
            done, _ = await asyncio.wait({call}, timeout=self.patience)
            if not done:
                # A call's own refused attempt says only that it was refused just now: left in,
                # each call would date the outage from itself (and a read count itself as held).
                ours = (path.strip("/"), began)
                health = await self._health_or_none(ours)
                if health is not None and health.service_down:
                    call.cancel()
                    self.degraded = health
                    if idempotency_key is not None:
                        raise await self._held(path, body, idempotency_key, health)
                    await self._drop_abandoned_read(path, began)
                    raise ServiceDown(health)
                # A change that waits behind a paused call of its SKU would wait for a person.
                if idempotency_key is not None and (holding := await self._paused_holding(path)) is not None:
                    call.cancel()
                    raise Blocked(_what(path), await self._invocation_of(path, body, idempotency_key), holding)
            response = await call
        finally:
            if not call.done():
                call.cancel()
        if response.is_error:
            message = _message(response)
            if response.status_code == 404:
                raise NotFound(message)
            raise Refused(response.status_code, message)
        return response.json() if response.content else None

    async def send(self, path: str, body: Any, idempotency_key: str) -> str | None:
        """Hand a call to Restate without waiting for it to run: its invocation id."""
        answer = await self._request(
            "POST",
            f"{self.ingress_url}{path}/send",
            "ingress",
            json=body,
            headers={"idempotency-key": idempotency_key},
        )
        if answer.is_error:
            raise Refused(answer.status_code, _message(answer))
        ident = answer.json().get("invocationId") if answer.content else None
        return str(ident) if ident else None

    async def _drop_abandoned_read(self, path: str, since: float) -> None:
        """A read nobody waits for any more would otherwise run when the service is back, and
        pile up in Restate meanwhile: kill it (a read changes nothing, so nothing is lost)."""
        target = path.strip("/")
        try:
            rows = await self.sql(
                f"SELECT id FROM sys_invocation WHERE target = {literal(target)} AND status = 'backing-off' "
                f"AND created_at >= TIMESTAMP {literal(sql_time(since - 1))}"
            )
            for row in rows:
                await self._request("PATCH", f"{self.admin_url}/invocations/{row['id']}/kill", "admin API")
        except OperatorError:
            pass  # best effort: the read is harmless if it runs later

    async def _held(self, path: str, body: Any, idempotency_key: str, health: Health) -> Accepted | Blocked:
        """What a change Restate keeps while the service is down waits for: the service, or,
        when a paused call holds its SKU, a person resuming that call (the service coming back
        does not run it then)."""
        invocation = await self._invocation_of(path, body, idempotency_key)
        if (holding := await self._paused_holding(path)) is not None:
            return Blocked(_what(path), invocation, holding)
        return Accepted(_what(path), invocation, health)

    async def _invocation_of(self, path: str, body: Any, idempotency_key: str) -> str | None:
        # The same key attaches to the call Restate already holds: its id, and no second call.
        try:
            return await self.send(path, body, idempotency_key)
        except OperatorError:
            return None

    async def health(self, ours: tuple[str, float] | None = None) -> Health:
        """Is the service down? Restate's invocations that back off because the service refused
        them say so, and since when (their first refused attempt of this outage). `ours`: the
        target and start of a call of our own, which is not counted as evidence."""
        rows = await self.sql(
            "SELECT id, target, created_at, last_failure, last_failure_error_code, next_retry_at FROM sys_invocation "
            "WHERE status = 'backing-off' AND target_service_name IN ('SkuAgent', 'Replenish')"
        )
        all_refused = [r for r in rows if is_outage_text(r.get("last_failure_error_code"), r.get("last_failure"))]
        mine = [r for r in all_refused if ours is not None and _is_ours(r, *ours)]
        refused = [r for r in all_refused if r not in mine]
        if not refused:
            # Nothing in flight to tell (every run waits): ask the deployment itself, or else
            # our own read was refused just now, which dates nothing.
            silent = await self._deployment_silent()
            if silent is None and mine:
                silent = error_text(mine[0].get("last_failure"))
            return Health(service_down=True, error=silent, found_at=time.time()) if silent else Health()
        ids = ", ".join(literal(str(r["id"])) for r in refused)
        events = await self.sql(
            "SELECT id, after_journal_entry_index, appended_at, event_type, event_json FROM sys_journal_events "
            f"WHERE event_type = 'TransientError' AND id IN ({ids})"
        )
        # Restate records an error again only when it changes: an invocation's current outage
        # began with the first of the refusals that end its list of recorded errors.
        by_invocation: dict[str, list[TransientFailure]] = {}
        for row in events:
            for failure in transient_failures([row]):
                by_invocation.setdefault(str(row["id"]), []).append(failure)
        starts = []
        for failures in by_invocation.values():
            streak = None
            for failure in sorted(failures, key=lambda f: f.at):
                refused_now = is_outage_text(failure.code, failure.message)
                streak = (streak if streak is not None else failure.at) if refused_now else None
            if streak is not None:
                starts.append(streak)
        nexts = [t for r in refused if (t := epoch(r.get("next_retry_at"))) is not None]
        return Health(
            service_down=True,
            since=min(starts) if starts else None,
            error=error_text(refused[0].get("last_failure")),
            waiting_invocations=len(refused),
            next_attempt_at=min(nexts) if nexts else None,
        )

    async def _deployment_silent(self) -> str | None:
        """Why the deployment serving the agents does not answer its health check, or None.

        Only for a deployment on this machine (a loopback address, as the local stack registers):
        elsewhere Restate may reach what this machine cannot, and a failed look proves nothing.
        """
        rows = await self.sql(
            "SELECT d.ty, d.endpoint FROM sys_service s JOIN sys_deployment d ON s.deployment_id = d.id "
            "WHERE s.name = 'SkuAgent'"
        )
        endpoint = str(rows[0].get("endpoint") or "") if rows and rows[0].get("ty") == "http" else ""
        if urlsplit(endpoint).hostname not in {"127.0.0.1", "localhost", "::1"}:
            return None
        try:
            await self._client.get(endpoint.rstrip("/") + "/health", timeout=HEALTH_PROBE_SECONDS)
        except httpx.TransportError as e:
            return f"its deployment at {endpoint} does not answer ({type(e).__name__})"
        return None

    async def paused(self, keys: list[str] | None = None) -> list[PausedCall]:
        """Paused invocations of the SkuAgent, Replenish and RunArchive objects with these keys
        (a SKU, its runs' ids), or of all of them (`None`), oldest first."""
        if keys is not None and not keys:
            return []
        only = f"AND target_service_key IN ({', '.join(literal(k) for k in keys)}) " if keys is not None else ""
        rows = await self.sql(
            "SELECT id, target, modified_at, last_failure, last_failure_error_code FROM sys_invocation "
            "WHERE status = 'paused' AND target_service_name IN ('SkuAgent', 'Replenish', 'RunArchive') "
            f"{only}ORDER BY modified_at"
        )
        return [
            PausedCall(
                id=str(r["id"]),
                target=str(r["target"]),
                since=epoch(r.get("modified_at")),
                error=error_text(r["last_failure"]) if r.get("last_failure") else None,
                code=r.get("last_failure_error_code") or None,
            )
            for r in rows
        ]

    async def paused_of(self, record: SkuRecord) -> list[PausedCall]:
        """The paused calls of a SKU's agent, its active run and its recent runs."""
        return await self.paused(paused_keys(record))

    async def _paused_holding(self, path: str) -> PausedCall | None:
        """The paused call that holds a SKU's agent this call is for (only exclusive calls wait)."""
        parts = path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "SkuAgent":
            return None
        try:
            found = await self.paused([parts[1]])
        except OperatorError:
            return None
        return next((p for p in found if p.holds_sku), None)

    async def answered_since(self, at: float) -> bool:
        """Whether the service ran an invocation of ours to success since `at` (a killed call
        also counts as completed in Restate, but not as a success)."""
        rows = await self.sql(
            "SELECT count(*) AS n FROM sys_invocation WHERE status = 'completed' AND completion_result = 'success' "
            "AND target_service_name IN ('SkuAgent', 'Replenish', 'RunArchive') "
            f"AND completed_at >= TIMESTAMP {literal(sql_time(at))}"
        )
        return bool(rows) and int(rows[0]["n"]) > 0

    async def _health_or_none(self, ours: tuple[str, float] | None = None) -> Health | None:
        try:
            return await self.health(ours)
        except OperatorError:
            return None

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
        except ServiceDown as e:
            self.degraded = e.health
            return await self.stored_sku_record(sku)
        return SkuRecord.model_validate(body)

    async def run_view(self, run_id: str) -> RunView:
        try:
            return RunView.model_validate(await self.ingress("POST", f"/Replenish/{run_id}/state"))
        except ServiceDown as e:
            self.degraded = e.health
            return await self.stored_run_view(run_id)

    # --- the same, from Restate's storage: what is shown while the service is down -----

    async def stored_sku_record(self, sku: str) -> SkuRecord:
        sku = valid_sku(sku)
        rows = await self.sql(
            f"SELECT value_utf8 FROM state WHERE service_name = 'SkuAgent' AND key = {literal(names.SKU_RECORD)} "
            f"AND service_key = {literal(sku)}"
        )
        if not rows or not rows[0].get("value_utf8"):
            raise NotFound(f"unknown SKU {sku}: no agent for it in Restate's storage")
        return SkuRecord.model_validate_json(rows[0]["value_utf8"])

    async def stored_run_view(self, run_id: str) -> RunView:
        rows = await self.sql(
            "SELECT key, value_utf8 FROM state WHERE service_name = 'Replenish' "
            f"AND service_key = {literal(run_id)} AND key IN ({literal(names.STATE)}, {literal(names.WAITING)})"
        )
        values = {r["key"]: r["value_utf8"] for r in rows if r.get("value_utf8")}
        state = State.model_validate_json(values[names.STATE]) if names.STATE in values else None
        waiting = Waiting.model_validate_json(values[names.WAITING]) if names.WAITING in values else None
        return RunView(state=without_secrets(state) if state else None, waiting=waiting)

    async def deliver(
        self, sku: str, event: str, payload: dict[str, Any], idempotency_key: str | None = None
    ) -> dict[str, Any]:
        sku = valid_sku(sku)
        body = {"event": event, "payload": payload}
        key = idempotency_key or f"operator-{uuid.uuid4()}"
        answer: dict[str, Any] = await self.ingress("POST", f"/SkuAgent/{sku}/deliver", body, key)
        return answer

    # --- many agents at once, over SQL --------------------------------------------------

    async def sku_records(self) -> list[SkuRecord]:
        rows = await self.sql(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = 'SkuAgent' "
            f"AND key = {literal(names.SKU_RECORD)}"
        )
        records = [SkuRecord.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")]
        return sorted(records, key=lambda r: r.sku)

    async def sku_records_of(self, skus: list[str]) -> list[SkuRecord]:
        if not skus:
            return []
        keys = ", ".join(literal(valid_sku(s)) for s in skus)
        rows = await self.sql(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = 'SkuAgent' "
            f"AND key = {literal(names.SKU_RECORD)} AND service_key IN ({keys})"
        )
        return [SkuRecord.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")]

    async def waiting_runs(self) -> dict[str, Waiting]:
        rows = await self.sql(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = 'Replenish' "
            f"AND key = {literal(names.WAITING)}"
        )
        return {r["service_key"]: Waiting.model_validate_json(r["value_utf8"]) for r in rows if r.get("value_utf8")}

    async def run_states(self, run_ids: list[str]) -> dict[str, State]:
        if not run_ids:
            return {}
        keys = ", ".join(literal(r) for r in run_ids)
        rows = await self.sql(
            "SELECT service_key, value_utf8 FROM state WHERE service_name = 'Replenish' "
            f"AND key = {literal(names.STATE)} "
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
            f"AND j.entry_lite_json LIKE '%\"{names.WAITING}\"%' GROUP BY i.target_service_key"
        )
        return {r["run"]: t for r in rows if (t := epoch(r.get("since"))) is not None}

    async def run_invocations(self, run_ids: list[str]) -> dict[str, Invocation]:
        if not run_ids:
            return {}
        targets = ", ".join(literal(f"Replenish/{r}/run") for r in run_ids)
        rows = await self.sql(
            "SELECT id, target_service_key, status, created_at, completed_at, retry_count, last_failure, "
            "last_failure_error_code, last_failure_related_command_name, last_start_at, next_retry_at "
            f"FROM sys_invocation WHERE target IN ({targets})"
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

    async def answered_after(self, t: float) -> float | None:
        """The first sign after `t` that the service answered Restate: a journal command (only
        the service writes those), an invocation the service completed or suspended, or an
        attempt in flight now that started after `t` and was not refused.

        An attempt that resumes a run which only waits (the manager's answer, a supplier's
        reply) replays its journal and writes nothing new, so its start would show nowhere but
        in Restate's live record of the attempt; the run's next command may come days later.
        Restate forgets when an attempt started once it suspends or completes: a suspension
        (its time) is then the sign, until the run is woken again."""
        at = f"TIMESTAMP {literal(sql_time(t))}"
        ours = "target_service_name IN ('SkuAgent', 'Replenish')"
        # Every command but the Input (Restate writes that one when it accepts the call).
        rows = await self.sql(
            "SELECT min(appended_at) AS t FROM sys_journal WHERE entry_type LIKE 'Command:%' "
            f"AND entry_type <> 'Command: Input' AND appended_at > {at}"
        )
        # A completion counts only when the service gave it (an invocation killed or cancelled
        # through the admin API completes too, with the service still down).
        rows += await self.sql(
            f"SELECT min(completed_at) AS t FROM sys_invocation WHERE completed_at > {at} "
            f"AND completion_result = 'success' AND {ours}"
        )
        # The service suspends an invocation (Restate only passes the inactivity timeout on).
        rows += await self.sql(
            f"SELECT min(modified_at) AS t FROM sys_invocation WHERE status = 'suspended' AND modified_at > {at} "
            f"AND {ours}"
        )
        # A refused attempt fails within milliseconds and backs off: one still running a moment
        # after it started was answered.
        rows += await self.sql(
            f"SELECT min(last_start_at) AS t FROM sys_invocation WHERE status = 'running' AND last_start_at > {at} "
            f"AND last_start_at < now() - INTERVAL '{ANSWERED_ATTEMPT_SECONDS} seconds' AND {ours}"
        )
        times = [v for r in rows if (v := epoch(r.get("t"))) is not None]
        return min(times) if times else None

    async def approval_messages(self, run_id: str) -> list[Decision]:
        """The manager's answers the run received, from its durable promises (tokens dropped)."""
        rows = await self.sql(
            "SELECT key, completion_success_value_utf8 AS value FROM sys_promise WHERE service_name = 'Replenish' "
            f"AND service_key = {literal(run_id)} AND key LIKE 'approval-%' AND completed = true"
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


def _what(path: str) -> str:
    """`/SkuAgent/SKU-1/check` as people say it: `check` for SKU-1."""
    parts = path.strip("/").split("/")
    return f"`{parts[-1]}` for {parts[1]}" if len(parts) >= 3 else path


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        return response.text.strip() or response.reason_phrase
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)
