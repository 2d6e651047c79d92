"""The replay itself, on a private copy: nothing here reaches the live stack or an outside party.

1. A private restate-server on the copy (the pinned binary, free ports, the copy as its base dir),
   set so that an invocation whose attempt fails is paused at once (`on-max-attempts = pause`) and
   a run suspends as soon as it waits (inactivity timeout 0).
2. Every in-flight SkuAgent and Replenish invocation is parked: a suspended one is resumed on the
   deployment it is pinned to, whose address nobody serves on the copy (checked first), so its
   attempt fails and Restate pauses it; a running one fails and pauses by itself.
3. The candidate is served on a free port with every outside party pointed at the recorder, and
   registered with the private Restate only.
4. Each parked invocation is resumed onto the candidate's deployment (`PATCH /invocations/{id}/resume
   ?deployment=`, what `restate invocations resume --deployment` does): Restate sends it the whole
   journal, which the candidate must replay command by command.
5. Each is judged from Restate's records (sys_invocation): suspended again or completed after an
   attempt on the candidate is a replay to the end of its journal (past it, if its journal grew);
   paused again with the candidate's attempt failed inside the old journal, or with a journal
   mismatch (RT0016), is a divergence, at the command index Restate names.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel

from replenisher.stack.admin import AdminError, list_deployments, register_deployment, sql
from replenisher.stack.local import SERVICE_APP
from replenisher.stack.ports import LOOPBACK, RestatePorts, free_port
from replenisher.stack.processes import AsgiApp, ProcessFailedError, RestateServer, Server, http_answers
from replenisher.upgrade.corpus import NODE_NAME, Copy
from replenisher.upgrade.recorder import Recorder

SERVICES = ("SkuAgent", "Replenish")
# Restate's error codes for a replay that does not match its journal (RT0016), and for a journal
# the SDK cannot read back (protocol violations, unknown entries).
MISMATCH_CODES = frozenset({"RT0016", "RT0012", "RT0003"})
PRIVATE_RESTATE_ENV = {
    "RESTATE_WORKER__INVOKER__INACTIVITY_TIMEOUT": "0s",
    "RESTATE_DEFAULT_RETRY_POLICY__MAX_ATTEMPTS": "1",
    "RESTATE_DEFAULT_RETRY_POLICY__ON_MAX_ATTEMPTS": "pause",
    "RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL": "100ms",
}
_COLUMNS = "id, target, status, pinned_deployment_id, journal_commands_size"
_POLL = 0.2

Outcome = Literal["replayed", "diverged"]


class CandidateError(RuntimeError):
    """The candidate did not start, or Restate would not register it (exit 3)."""


class CopyError(RuntimeError):
    """The copy cannot be checked safely: Restate would not start on it, or its deployments are served (exit 3)."""


class Verdict(BaseModel):
    id: str
    target: str
    outcome: Outcome
    status: str
    journal_commands: int
    reached: int
    error_code: str | None = None
    failure: str | None = None
    at_command: int | None = None
    at_name: str | None = None
    at_type: str | None = None

    @property
    def past_end(self) -> bool:
        return self.reached > self.journal_commands


class Result(BaseModel):
    verdicts: list[Verdict]
    outside_calls: list[str]

    @property
    def diverged(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.outcome == "diverged"]


@dataclass
class Options:
    candidate_app: str = SERVICE_APP
    server: Server = "granian"
    settle_seconds: float = 120.0
    work: Path = field(default_factory=Path)
    config_file: Path | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)


def _rows(admin_url: str, where: str) -> list[dict[str, Any]]:
    return sql(admin_url, f"SELECT {_COLUMNS} FROM sys_invocation WHERE {where}")


def _in_flight(admin_url: str) -> list[dict[str, Any]]:
    names = ", ".join(f"'{s}'" for s in SERVICES)
    return _rows(
        admin_url,
        f"target_service_name IN ({names}) AND status != 'completed' AND pinned_deployment_id IS NOT NULL",
    )


def _by_id(admin_url: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    listed = ", ".join(f"'{i}'" for i in ids)
    return {r["id"]: r for r in _rows(admin_url, f"id IN ({listed})")} if ids else {}


def _resume(admin_url: str, invocation: str, deployment: str | None = None, seconds: float = 30.0) -> None:
    """`restate invocations resume [--deployment]`; a 503 (a partition still electing its leader
    just after the start) is tried again for up to `seconds`."""
    params = {"deployment": deployment} if deployment else {}
    deadline = time.monotonic() + seconds
    while True:
        response = httpx.patch(f"{admin_url}/invocations/{invocation}/resume", params=params, timeout=30.0)
        if response.status_code != 503 or time.monotonic() >= deadline:
            break
        time.sleep(_POLL)
    if response.is_error:
        raise AdminError(f"resuming {invocation} failed with HTTP {response.status_code}: {response.text}")


def _wait(
    admin_url: str, ids: list[str], done: Callable[[dict[str, Any]], bool], seconds: float
) -> dict[str, dict[str, Any]]:
    """Poll until `done(row)` holds for every id, or `seconds` pass; the rows as last read."""
    deadline = time.monotonic() + seconds
    while True:
        rows = _by_id(admin_url, ids)
        if all(i in rows and done(rows[i]) for i in ids) or time.monotonic() >= deadline:
            return rows
        time.sleep(_POLL)


def _quiet(admin_url: str, seconds: float) -> None:
    """Until no SkuAgent or Replenish invocation is starting or running: the timers that fell due while
    the data lay copied have fired, and their attempts on the unserved deployment have been paused."""
    names = ", ".join(f"'{s}'" for s in SERVICES)
    busy = f"target_service_name IN ({names}) AND status IN ('pending', 'ready', 'running', 'backing-off')"
    deadline = time.monotonic() + seconds
    calm = 0
    while calm < 3 and time.monotonic() < deadline:
        calm = 0 if _rows(admin_url, busy) else calm + 1
        time.sleep(_POLL)


def _served(uris: list[str]) -> None:
    served = [uri for uri in uris if http_answers(uri, timeout=0.5)]
    if served:
        raise CopyError(
            f"something answers at {', '.join(served)}, an address this data's deployments record: "
            "stop the stack the data came from (`make down`) and run the check again"
        )


def _start_restate(copy: Copy, options: Options) -> RestateServer:
    restate = RestateServer(
        RestatePorts.free(),
        copy.base_dir,
        PRIVATE_RESTATE_ENV,
        log_path=options.work / "restate-server.log",
        config_file=options.config_file,
        node_name=NODE_NAME,
    )
    try:
        restate.start()
        restate.wait_ready(60.0)
    except ProcessFailedError as e:
        restate.stop()
        raise CopyError(
            f"restate-server would not start on the copy (data from another Restate version, or damaged): {e}"
        ) from e
    return restate


def _candidate_env(copy: Copy, recorder: Recorder, extra: Mapping[str, str]) -> dict[str, str]:
    env = {**copy.manifest.service_env, **extra}
    # Every outside party the service talks to, the model's API included, is the recorder.
    env["REPLENISHER_WORLD_URL"] = recorder.url
    env["REPLENISHER_ANTHROPIC_BASE_URL"] = recorder.url
    if env.get("REPLENISHER_DECIDER") == "claude":
        env["ANTHROPIC_API_KEY"] = "upgrade-check-refused"
    return env


def _start_candidate(env: Mapping[str, str], options: Options) -> AsgiApp:
    candidate = AsgiApp(
        options.candidate_app,
        free_port(),
        env,
        name="candidate",
        log_path=options.work / "candidate.log",
        server=options.server,
    )
    try:
        candidate.start()
        candidate.wait_ready(60.0)
    except ProcessFailedError as e:
        candidate.stop()
        raise CandidateError(f"the candidate ({options.candidate_app}) did not start: {e}") from e
    return candidate


def _parked(row: dict[str, Any]) -> bool:
    return row["status"] == "paused"


class Failure(BaseModel):
    """The failure Restate paused an invocation for, from its `Paused` journal event."""

    error_code: str | None = None
    message: str = ""
    related_command_index: int | None = None
    related_command_name: str | None = None
    related_command_type: str | None = None


def _pauses(admin_url: str, ids: list[str]) -> dict[str, list[Failure]]:
    """Each invocation's pauses, oldest first, with the failure each was for."""
    if not ids:
        return {}
    listed = ", ".join(f"'{i}'" for i in ids)
    rows = sql(
        admin_url,
        f"SELECT id, appended_at, event_json FROM sys_journal_events WHERE event_type = 'Paused' AND id IN ({listed}) "
        "ORDER BY appended_at",
    )
    pauses: dict[str, list[Failure]] = {i: [] for i in ids}
    for row in rows:
        failure = json.loads(row["event_json"]).get("last_failure") or {}
        pauses[row["id"]].append(
            Failure(
                error_code=failure.get("restate_doc_error_code"),
                message=str(failure.get("error_message", "")),
                related_command_index=failure.get("related_command_index"),
                related_command_name=failure.get("related_command_name"),
                related_command_type=failure.get("related_command_type"),
            )
        )
    return pauses


def _judge(before: dict[str, Any], row: dict[str, Any] | None, failure: Failure | None, moved: bool) -> Verdict:
    """`failure`: why the candidate's attempt was paused, if it was."""
    journal = int(before.get("journal_commands_size") or 0)
    row = row or {**before, "status": "completed"}  # purged once completed: it ran to its end
    verdict = Verdict(
        id=before["id"],
        target=before["target"],
        outcome="replayed",
        status=row["status"],
        journal_commands=journal,
        reached=int(row.get("journal_commands_size") or journal),
    )
    if not moved:
        failure_text = (
            f"could not be moved onto the candidate: it was {row['status']}, not paused, when the candidate came"
        )
        return verdict.model_copy(update={"outcome": "diverged", "failure": failure_text})
    if failure is not None:
        index = failure.related_command_index
        inside = index is not None and index < journal
        return verdict.model_copy(
            update={
                "outcome": "diverged" if failure.error_code in MISMATCH_CODES or inside else "replayed",
                "error_code": failure.error_code,
                "failure": failure.message,
                "at_command": index,
                "at_name": failure.related_command_name,
                "at_type": failure.related_command_type,
            }
        )
    if row["status"] in ("suspended", "completed"):
        return verdict
    return verdict.model_copy(
        update={"outcome": "diverged", "failure": f"did not settle on the candidate (still {row['status']})"}
    )


def _settle(
    admin_url: str, ids: list[str], parked_pauses: Mapping[str, int], seconds: float
) -> tuple[dict[str, dict[str, Any]], dict[str, Failure]]:
    """Poll until every moved invocation is suspended or completed again, or paused once more (its
    attempt on the candidate failed); the rows, and the failures of those paused again."""
    deadline = time.monotonic() + seconds
    while True:
        rows = _by_id(admin_url, ids)
        pauses = _pauses(admin_url, ids)
        failed = {i: p[-1] for i, p in pauses.items() if len(p) > parked_pauses[i]}
        settled = all(i in failed or i not in rows or rows[i]["status"] in ("suspended", "completed") for i in ids)
        if settled or time.monotonic() >= deadline:
            return rows, failed
        time.sleep(_POLL)


def check(copy: Copy, options: Options) -> Result:
    """Replay every in-flight SkuAgent and Replenish invocation of `copy` against the candidate."""
    # Known before the start (the manifest names them), so no overdue timer reaches a live process.
    _served(copy.manifest.deployments)
    with Recorder() as recorder:
        restate = _start_restate(copy, options)
        candidate: AsgiApp | None = None
        try:
            admin = restate.admin_url
            _served([d.uri for d in list_deployments(admin) if d.uri])
            _quiet(admin, options.settle_seconds)
            before = {row["id"]: row for row in _in_flight(admin)}
            ids = sorted(before)
            for row in before.values():
                if row["status"] == "suspended":
                    _resume(admin, row["id"])
            parked = _wait(admin, ids, _parked, options.settle_seconds)
            candidate = _start_candidate(_candidate_env(copy, recorder, options.extra_env), options)
            try:
                deployment = register_deployment(admin, f"http://{LOOPBACK}:{candidate.port}", force=False).id
            except AdminError as e:
                raise CandidateError(f"the private Restate would not register the candidate: {e}") from e
            moved = [i for i in ids if i in parked and _parked(parked[i])]
            parked_pauses = {i: len(p) for i, p in _pauses(admin, moved).items()}
            for invocation in moved:
                _resume(admin, invocation, deployment)
            rows, failed = _settle(admin, moved, parked_pauses, options.settle_seconds)
            rows = {**_by_id(admin, ids), **rows}
            verdicts = [_judge(before[i], rows.get(i), failed.get(i), i in moved) for i in ids]
            return Result(verdicts=verdicts, outside_calls=recorder.calls)
        finally:
            if candidate is not None:
                candidate.stop()
            restate.stop()
