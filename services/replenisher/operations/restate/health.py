"""Whether the replenisher service answers Restate, from Restate's own records.

Restate answering while its attempts to reach the service are refused means the service is
down: the invocations that back off say so, and since when. With nothing in flight (every run
waits), a deployment on this machine is asked directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, Field

from replenisher.loop import names
from replenisher.operations.restate import attempting
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.restate.http import RestateHttp, among, literal
from replenisher.timeline.build import is_outage_text
from replenisher.timeline.format import clock
from replenisher.timeline.journal import Row, TransientFailure, epoch, error_text, sql_time, transient_failures

HEALTH_PROBE_SECONDS = 2.0  # how long the agents' deployment may take to answer its health check
# An attempt still running this long after it started was answered by the service: a refused
# one (connection refused, broken pipe) fails within milliseconds.
ANSWERED_ATTEMPT_SECONDS = 1
# The objects whose calls tell whether the service answers (RunArchive's too, for a success).
AGENTS = (names.SKU_AGENT, names.REPLENISH)
OURS = (names.SKU_AGENT, names.REPLENISH, names.RUN_ARCHIVE)


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


class ServiceDown(OperatorError):
    """Restate is up, but its attempts to reach the replenisher service are refused."""

    def __init__(self, health: Health) -> None:
        super().__init__(health.line())
        self.health = health


def _is_ours(row: Row, target: str, began: float) -> bool:
    """Whether an invocation is the call of ours to `target` that started at `began`."""
    return row.get("target") == target and (epoch(row.get("created_at")) or 0.0) >= began - 1


async def health(
    http: RestateHttp,
    now: float,
    ours: tuple[str, float] | None = None,
    silent: Callable[[], Awaitable[str | None]] | None = None,
) -> Health:
    """Is the service down? Restate's invocations that back off because the service refused
    them say so, and since when (their first refused attempt of this outage). `ours`: the
    target and start of a call of our own, which is not counted as evidence. `silent`: how
    the deployment itself is asked when nothing is in flight (`deployment_silent` by default)."""
    all_refused = [
        r for r in await _backing_off(http) if is_outage_text(r.get("last_failure_error_code"), r.get("last_failure"))
    ]
    mine = [r for r in all_refused if ours is not None and _is_ours(r, *ours)]
    refused = [r for r in all_refused if r not in mine]
    if not refused:
        # Nothing in flight to tell (every run waits): ask the deployment itself, or else
        # our own read was refused just now, which dates nothing.
        why = await (silent() if silent is not None else deployment_silent(http))
        if why is None and mine:
            why = error_text(mine[0].get("last_failure"))
        return Health(service_down=True, error=why, found_at=now) if why else Health()
    ids = ", ".join(literal(str(r["id"])) for r in refused)
    events = await http.sql(
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


async def _backing_off(http: RestateHttp) -> list[Row]:
    """The agents' and runs' invocations backing off, found in the invoker's own table (small): those
    refused are read by id. Only when many are refused (an outage at many SKUs) is every invocation
    Restate keeps read, as one scan (`attempting`)."""
    columns = (
        "id, target, target_service_name, status, created_at, last_failure, last_failure_error_code, next_retry_at"
    )
    held = await attempting.attempted(http, attempting.BACKING_OFF)
    ids = [str(r["id"]) for r in held if is_outage_text(r.get("last_failure_error_code"), r.get("last_failure"))]
    rows = await attempting.by_ids(http, columns, ids) if ids else []
    if rows is None:
        rows = await http.sql(
            f"SELECT {columns} FROM sys_invocation "
            f"WHERE status = 'backing-off' AND target_service_name IN {among(AGENTS)}"
        )
    return [r for r in rows if r.get("status") == "backing-off" and r.get("target_service_name") in AGENTS]


async def deployment_silent(http: RestateHttp) -> str | None:
    """Why the deployment serving the agents does not answer its health check, or None.

    Only for a deployment on this machine (a loopback address, as the local stack registers):
    elsewhere Restate may reach what this machine cannot, and a failed look proves nothing.
    """
    rows = await http.sql(
        "SELECT d.ty, d.endpoint FROM sys_service s JOIN sys_deployment d ON s.deployment_id = d.id "
        f"WHERE s.name = {literal(names.SKU_AGENT)}"
    )
    endpoint = str(rows[0].get("endpoint") or "") if rows and rows[0].get("ty") == "http" else ""
    if urlsplit(endpoint).hostname not in {"127.0.0.1", "localhost", "::1"}:
        return None
    try:
        await http.client.get(endpoint.rstrip("/") + "/health", timeout=HEALTH_PROBE_SECONDS)
    except httpx.TransportError as e:
        return f"its deployment at {endpoint} does not answer ({type(e).__name__})"
    return None


async def answered_since(http: RestateHttp, at: float) -> bool:
    """Whether the service ran an invocation of ours to success since `at` (a killed call
    also counts as completed in Restate, but not as a success)."""
    rows = await http.sql(
        "SELECT count(*) AS n FROM sys_invocation WHERE status = 'completed' AND completion_result = 'success' "
        f"AND target_service_name IN {among(OURS)} "
        f"AND completed_at >= TIMESTAMP {literal(sql_time(at))}"
    )
    return bool(rows) and int(rows[0]["n"]) > 0


async def answered_after(http: RestateHttp, t: float) -> float | None:
    """The first sign after `t` that the service answered Restate: its note that it answered
    an attempt after failed ones (`durable/answered.py`), a journal command (only the service
    writes those), an invocation the service completed or suspended, or an attempt in flight
    now that started after `t` and was not refused.

    An attempt that resumes a run which only waits (the manager's answer, a supplier's
    reply) replays its journal and writes nothing new; the run's next command may come days
    later. Restate keeps when an attempt started only while it runs (a suspension's time
    until the run is woken again), and records a row of identical refusals once, so after
    the run has moved on only the note dates that attempt: it is Restate's `created_at` of
    the note, taken as the attempt starts, and kept for the journal retention. The attempt
    itself comes at most one of Restate's retry intervals after the service was back."""
    at = f"TIMESTAMP {literal(sql_time(t))}"
    ours = f"target_service_name IN {among(AGENTS)}"
    # Every command but the Input (Restate writes that one when it accepts the call).
    rows = await http.sql(
        "SELECT min(appended_at) AS t FROM sys_journal WHERE entry_type LIKE 'Command:%' "
        f"AND entry_type <> 'Command: Input' AND appended_at > {at}"
    )
    # A completion counts only when the service gave it (an invocation killed or cancelled
    # through the admin API completes too, with the service still down).
    rows += await http.sql(
        f"SELECT min(completed_at) AS t FROM sys_invocation WHERE completed_at > {at} "
        f"AND completion_result = 'success' AND {ours}"
    )
    # The service suspends an invocation (Restate only passes the inactivity timeout on).
    rows += await http.sql(
        f"SELECT min(modified_at) AS t FROM sys_invocation WHERE status = 'suspended' AND modified_at > {at} AND {ours}"
    )
    # The service's own note that it answered an attempt after failed ones (durable/answered.py):
    # the one sign that outlives an attempt which resumed a waiting run and wrote nothing.
    rows += await http.sql(
        "SELECT min(created_at) AS t FROM sys_invocation "
        f"WHERE target_service_name = {literal(names.SERVICE_ANSWERED)} AND created_at > {at}"
    )
    # A refused attempt fails within milliseconds and backs off: one still running a moment
    # after it started was answered.
    rows += await http.sql(
        f"SELECT min(last_start_at) AS t FROM sys_invocation WHERE status = 'running' AND last_start_at > {at} "
        f"AND last_start_at < now() - INTERVAL '{ANSWERED_ATTEMPT_SECONDS} seconds' AND {ours}"
    )
    times = [v for r in rows if (v := epoch(r.get("t"))) is not None]
    return min(times) if times else None
