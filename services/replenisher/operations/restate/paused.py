"""Calls Restate paused: they run again only when a person resumes them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from pydantic import BaseModel, Field

from replenisher.domain.sku import SkuRecord, split_run_id
from replenisher.loop import names
from replenisher.operations.restate import attempting
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.restate.health import OURS
from replenisher.operations.restate.http import RestateHttp, among, literal
from replenisher.timeline.format import clock
from replenisher.timeline.journal import Row, epoch, error_text, invocation
from replenisher.timeline.model import Invocation

# The SkuAgent's shared handlers (reads that run beside its exclusive calls); kept equal to the
# object's own definition by a test, so this module needs no Restate SDK.
AGENT_SHARED_HANDLERS = frozenset({"status"})


def paused_keys(record: SkuRecord) -> list[str]:
    """Where a paused call of this SKU can be: its agent, its active run, the run whose order is
    unresolved, and its recent runs (a run's last calls, e.g. `RunArchive.keep`, outlive it)."""
    runs = [record.active.run_id] if record.active else []
    if record.unresolved is not None:
        runs.append(record.unresolved.run_id)
    runs += [outcome.run_id for outcome in reversed(record.outcomes)]
    return [record.sku, *dict.fromkeys(runs)]


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
        return self.target.startswith(f"{names.SKU_AGENT}/")

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


async def paused(http: RestateHttp, keys: list[str] | None = None) -> list[PausedCall]:
    """Paused invocations of the SkuAgent, Replenish and RunArchive objects with these keys
    (a SKU, its runs' ids), or of all of them (`None`), oldest first."""
    if keys is not None and not keys:
        return []
    only = f"AND target_service_key IN {among(keys)} " if keys is not None else ""
    rows = await http.sql(
        "SELECT id, target, modified_at, last_failure, last_failure_error_code FROM sys_invocation "
        f"WHERE status = 'paused' AND target_service_name IN {among(OURS)} "
        f"{only}ORDER BY modified_at"
    )
    return [_paused_call(r) for r in rows]


def _paused_call(r: Row) -> PausedCall:
    return PausedCall(
        id=str(r["id"]),
        target=str(r["target"]),
        since=epoch(r.get("modified_at")),
        error=error_text(r["last_failure"]) if r.get("last_failure") else None,
        code=r.get("last_failure_error_code") or None,
    )


class Troubled(BaseModel):
    paused: list[PausedCall] = Field(description="every call Restate paused, oldest first")
    retrying: dict[str, Invocation] = Field(
        description="every run retrying a step now (backing off, or running again after failed attempts), by run id"
    )


TROUBLED_COLUMNS = (
    "id, target, target_service_name, target_handler_name, target_service_key, status, created_at, completed_at, "
    "modified_at, retry_count, last_failure, last_failure_error_code, last_failure_related_command_name, "
    "last_start_at, next_retry_at"
)


async def paused_ids(http: RestateHttp) -> list[str]:
    """The ids of every call of ours Restate paused: one scan of every invocation it keeps, whatever
    the filter (a paused call is in no smaller table), of their ids alone."""
    rows = await http.sql(
        f"SELECT id FROM sys_invocation WHERE status = 'paused' AND target_service_name IN {among(OURS)}"
    )
    return [str(r["id"]) for r in rows]


async def troubled(http: RestateHttp, seen_paused: list[str] | None = None) -> Troubled:
    """`paused()` and the runs retrying a step. The runs retrying are found in the invoker's own table
    and read by id (`attempting`). The paused calls are `paused_ids()`, or `seen_paused` when given (a
    recent scan's, `RecentPaused`): read by id again, so a call resumed since is not counted."""
    paused = seen_paused if seen_paused is not None else await paused_ids(http)
    held = await attempting.attempted(
        http, f"({attempting.BACKING_OFF}) OR ({attempting.RETRYING_IN_FLIGHT})", columns="id"
    )
    ids = [*paused, *(str(r["id"]) for r in held)]
    rows = await attempting.by_ids(http, TROUBLED_COLUMNS, ids) if ids else []
    if rows is None:
        run = f"target_service_name = {literal(names.REPLENISH)} AND target_handler_name = {literal(names.RUN)}"
        rows = await http.sql(
            f"SELECT {TROUBLED_COLUMNS} FROM sys_invocation WHERE (status = 'paused' AND target_service_name IN "
            f"{among(OURS)}) OR ({run} AND (status = 'backing-off' OR status = 'running'))"
        )
    rows.sort(key=lambda r: epoch(r.get("modified_at")) or 0.0)
    return Troubled(
        paused=[_paused_call(r) for r in rows if r.get("status") == "paused" and r.get("target_service_name") in OURS],
        retrying={str(r["target_service_key"]): invocation(r) for r in rows if _retrying_run(r)},
    )


def _retrying_run(r: Row) -> bool:
    """A run backing off, or running again after failed attempts."""
    if r.get("target_service_name") != names.REPLENISH or r.get("target_handler_name") != names.RUN:
        return False
    retries = int(r.get("retry_count") or 0)
    return r.get("status") == "backing-off" or (
        r.get("status") == "running" and retries > 1 and r.get("last_failure") is not None
    )


async def paused_holding(http: RestateHttp, path: str) -> PausedCall | None:
    """The paused call that holds a SKU's agent this call is for (only exclusive calls wait)."""
    parts = path.strip("/").split("/")
    if len(parts) < 3 or parts[0] != names.SKU_AGENT:
        return None
    try:
        found = await paused(http, [parts[1]])
    except OperatorError:
        return None
    return next((p for p in found if p.holds_sku), None)


class RecentPaused:
    """The paused calls' ids as a recent scan found them, for a process that shows many pages (the
    console): scanned for its first page, then again in the background once `fresh_s` old, while the
    pages go on with the last scan's. A call resumed since is dropped by `troubled`'s read by id at
    once; one paused since shows after the next scan, `fresh_s` and a scan's time later at most."""

    def __init__(self, fresh_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.fresh_s = fresh_s
        self.clock = clock
        self._ids: list[str] | None = None
        self._at = 0.0
        self._scan: asyncio.Task[None] | None = None

    async def ids(self, http: RestateHttp) -> list[str]:
        if self._ids is None:
            await self._rescan(http)
        elif self.clock() - self._at >= self.fresh_s and (self._scan is None or self._scan.done()):
            self._scan = asyncio.create_task(self._rescan(http))
            self._scan.add_done_callback(_quiet)
        assert self._ids is not None
        return self._ids

    def saw(self, calls: list[PausedCall]) -> None:
        """Paused calls a page found by itself (a SKU's own page reads its calls by key): counted from now
        on, not from the next scan."""
        if self._ids is not None:
            self._ids = list(dict.fromkeys([*self._ids, *(call.id for call in calls)]))

    async def _rescan(self, http: RestateHttp) -> None:
        at = self.clock()
        self._ids, self._at = await paused_ids(http), at

    async def aclose(self) -> None:
        if self._scan is not None and not self._scan.done():
            self._scan.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._scan


def _quiet(task: asyncio.Task[None]) -> None:
    """A background scan that failed leaves the last scan's ids in use; the next page tries again."""
    if not task.cancelled():
        task.exception()
