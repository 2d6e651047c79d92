"""What the engineer on call sees when the service is down, and when only the world is failing.

Judged from Restate's own records and the world's: the service really killed (its process,
by the pid the fixture holds) for a measured time, a supplier really answering 503.
"""

from __future__ import annotations

import json
import math
import os
import time

import httpx
import pytest
from operator_support import Cli, pause_a_held_check, paused_check, refused_attempts, resume, setup_lasting_quotes

from e2e.scenario import JSON, Scenario, ok
from e2e.test_crash_matrix import arm, fired, release
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import ActiveRun, SkuRecord
from replenisher.durable.answered import NOTE_TIMEOUT_SECONDS
from replenisher.durable.sku_agent import sku_agent
from replenisher.operations.catalogue import ErpCatalogue
from replenisher.operations.overview import SkuQuery, sku_rows
from replenisher.operations.restate import attempting
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.health import ANSWERED_ATTEMPT_SECONDS
from replenisher.operations.restate.paused import AGENT_SHARED_HANDLERS, PausedCall, RecentPaused, paused_keys
from replenisher.operations.sku_page import listed_page
from replenisher.operations.timelines import load_timeline
from replenisher.stack.admin import Admin
from replenisher.stack.ports import free_port
from replenisher.timeline.build import is_outage
from replenisher.timeline.journal import epoch, sql_time, transient_failures
from replenisher.timeline.model import Timeline
from support import RegisteredService, eventually

pytestmark = pytest.mark.e2e


async def waiting_for_approval(scenario: Scenario, run_id: str) -> None:
    """The run has saved that it waits for the manager (the request reaches the inbox a moment before)."""

    async def saved() -> bool:
        waiting = (await scenario.run_view(run_id)).get("waiting")
        return bool(waiting) and waiting["tool"] == "wait_for_approval"

    await eventually(saved, timeout=20, what=f"{run_id} to wait for approval")


async def retries(admin: Admin, target: str) -> int:
    """How many times Restate tried a call again after a failed attempt."""
    rows = await admin.asql(f"SELECT retry_count FROM sys_invocation WHERE target = '{target}'")
    return max((int(r.get("retry_count") or 0) for r in rows), default=0)


def to_the_ms(t: float) -> float:
    """`t` cut to whole milliseconds, as Restate writes its timestamps: a refusal in the millisecond
    the service was killed in reads as earlier than that moment taken at the clock's full precision
    (a repeat round failed on it)."""
    return math.floor(t * 1000) / 1000


async def first_failure(admin: Admin, keys: list[str]) -> float | None:
    """When Restate recorded the first attempt that failed because the service did
    not answer or died mid-attempt, of an invocation of these SkuAgent keys / Replenish runs."""
    listed = ", ".join(f"'{k}'" for k in keys)
    rows = await admin.asql(
        "SELECT e.after_journal_entry_index, e.appended_at, e.event_type, e.event_json "
        "FROM sys_journal_events e JOIN sys_invocation i ON e.id = i.id "
        f"WHERE i.target_service_key IN ({listed})"
    )
    # Not cut at the kill's moment by Restate's own timestamps: a CI run recorded an outage's only
    # refusal with a time before the kill, even cut to the millisecond. Restate's invoker records a
    # transient error only once while it repeats unchanged with no new command in between
    # (`should_emit_transient_error_event`), so the one row kept can be an earlier attempt's. The
    # scenario's keys are fresh, so every outage Restate recorded for them is the test's one.
    times = [f.at for f in transient_failures(rows) if is_outage(f)]
    return min(times, default=None)


async def test_an_outage_band_lasts_as_long_as_the_service_was_down(
    cli: Cli, scenario: Scenario, service: RegisteredService, ingress: httpx.AsyncClient, admin: Admin
) -> None:
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    target = f"SkuAgent/{scenario.sku}/status"

    killed_at = time.time()
    service.kill()
    # A read of the SKU's record is refused while the service is down, and retried by Restate.
    sent = await ingress.post(f"/SkuAgent/{scenario.sku}/status/send")
    assert sent.status_code == 202, sent.text

    # The outage lasts until Restate has tried again and been refused again (an outage of several
    # refused attempts, one band), then the test ends it: no length of time to wait out.
    async def refused_again() -> bool:
        return await refused_attempts(admin, target) and await retries(admin, target) >= 2

    await eventually(refused_again, timeout=30, what="a refused attempt and a refused retry")
    # The band starts at the first attempt refused after the kill: the read's, or the run's own
    # if it was still running when the service died.
    first_refusal = await first_failure(admin, [scenario.sku, run_id])
    assert first_refusal is not None
    restarted_at = time.time()
    service.restart()

    async def read_again() -> float | None:
        rows = await admin.asql(
            f"SELECT completed_at FROM sys_invocation WHERE target = '{target}' AND status = 'completed'"
        )
        return epoch(rows[0].get("completed_at")) if rows else None

    read_at = await eventually(read_again, timeout=20, what="the held read to run once the service is back")
    # The run's own next journal entry comes only with the decision, after the read: a band that
    # ended there would end after `read_at`.
    await scenario.decide(request["po_number"], approved=True, up_to=4.0)
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"

    result = await cli("timeline", scenario.sku, "--json")
    assert result.code == 0, result
    [band] = json.loads(result.out)["bands"]
    assert to_the_ms(killed_at) <= band["start"] == pytest.approx(first_refusal, abs=1e-3), (
        "it starts at the first refused attempt"
    )
    if not restarted_at <= band["end"]:
        signs = await signs_between(admin, band["start"], restarted_at)
        pytest.fail(f"the band ended before the restart at {restarted_at}: {band}; Restate's records: {signs}")
    assert band["end"] <= read_at, "it ends when the service answered again (by the read at the latest)"
    assert band["ended_by"] == "the service answered again"
    assert band["end"] - band["start"] >= restarted_at - first_refusal, "as long as the service was down"

    text = await cli("timeline", scenario.sku, "--width", "160")
    row = next(line for line in text.out.splitlines() if "service down" in line and "░" in line)
    assert "when the service answered again" in row, text.out


async def signs_between(admin: Admin, t0: float, t1: float) -> JSON:
    """What Restate recorded between `t0` and `t1` that the timeline takes for the service answering
    (health.answered_after's signs, with whose they are): shown when a band ends where it should not."""
    at0, at1 = (f"TIMESTAMP '{sql_time(t)}'" for t in (t0, t1))
    return {
        "commands": await admin.asql(
            "SELECT j.id, i.target, j.entry_type, j.appended_at "
            "FROM sys_journal j JOIN sys_invocation i ON j.id = i.id "
            "WHERE j.entry_type LIKE 'Command:%' AND j.entry_type <> 'Command: Input' "
            f"AND j.appended_at > {at0} AND j.appended_at < {at1}"
        ),
        "invocations": await admin.asql(
            "SELECT id, target, status, last_start_at, modified_at, completed_at, completion_result "
            f"FROM sys_invocation WHERE (modified_at > {at0} AND modified_at < {at1}) "
            f"OR (last_start_at > {at0} AND last_start_at < {at1})"
        ),
    }


async def run_attempt(admin: Admin, target: str) -> JSON:
    """The invocation of a run as Restate has it now: id, status, and its attempt's start."""
    rows = await admin.asql(
        f"SELECT id, status, last_start_at, modified_at FROM sys_invocation WHERE target = '{target}'"
    )
    assert len(rows) == 1, rows
    return rows[0]


async def an_outage_of_the_running_run(
    scenario: Scenario, service: RegisteredService, admin: Admin, run_id: str
) -> tuple[float, float]:
    """The service killed while the run is in flight (waiting for the manager), kept down until
    Restate refused an attempt of the run, then started again: when the first refusal was, and
    when the restart began."""
    target = f"Replenish/{run_id}/run"
    service.kill()
    run = await run_attempt(admin, target)
    if run["status"] == "suspended":  # Restate suspended it first: it tries it now, as `resume` does
        await resume(admin, str(run["id"]))
    await eventually(lambda: refused_attempts(admin, target), timeout=30, what="a refused attempt of the run")
    first_refusal = await first_failure(admin, [scenario.sku, run_id])
    assert first_refusal is not None
    restarted_at = time.time()
    service.restart()
    return first_refusal, restarted_at


async def the_one_band(cli: Cli, admin: Admin, sku: str, first_refusal: float, restarted_at: float) -> JSON:
    """The SKU's timeline holds one outage band: from the first refused attempt, ended by the service
    answering again, not before the restart (else what Restate recorded in between is shown)."""
    result = await cli("timeline", sku, "--json")
    assert result.code == 0, result
    [band] = json.loads(result.out)["bands"]
    assert band["start"] == pytest.approx(first_refusal, abs=1e-3), "it starts at the first refused attempt"
    assert band["ended_by"] == "the service answered again", band
    if not restarted_at <= band["end"]:
        signs = await signs_between(admin, band["start"], restarted_at)
        pytest.fail(f"the band ended before the restart at {restarted_at}: {band}; Restate's records: {signs}")
    return band


async def test_a_band_ends_when_the_run_resumed_not_at_the_approval_that_followed(
    cli: Cli, scenario: Scenario, service: RegisteredService, admin: Admin
) -> None:
    """The service dies while the run waits for the manager. The run's attempt after the restart
    replays its journal and waits again, writing nothing new; the manager's answer follows. The
    band ends after the restart and at the latest when that attempt started (or, where Restate
    suspends at once, when the service suspended the run), not with the first command the approval
    brought."""
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    target = f"Replenish/{run_id}/run"
    # After the approval the run stops in flight at its order, so the attempt that resumed it is
    # still Restate's live record when the timeline is read.
    held = arm(run_id, "place_order", "before", action="hold")
    try:
        request = await scenario.pending_approval()
        await waiting_for_approval(scenario, run_id)
        first_refusal, restarted_at = await an_outage_of_the_running_run(scenario, service, admin, run_id)

        # In always-replay mode the resumed attempt suspends as soon as it has replayed to its wait
        # (an inactivity timeout of 0 s): seen running a moment before, it is not the attempt the
        # approval will reach. Wait for the suspension there, rather than race it.
        settled = ("suspended",) if os.environ.get("REPLENISHER_TEST_ALWAYS_REPLAY") else ("running", "suspended")

        async def resumed() -> JSON | None:
            run = await run_attempt(admin, target)
            at = epoch(run.get("last_start_at") if run["status"] == "running" else run.get("modified_at"))
            return run if run["status"] in settled and at is not None and at >= restarted_at else None

        run = await eventually(resumed, timeout=30, what="the run's attempt after the restart")
        if run["status"] == "running":
            resumed_at = epoch(run["last_start_at"])
            decided_at = time.time()
            await scenario.decide(request["po_number"], approved=True, up_to=4.0)
            await eventually(lambda: held in fired(), timeout=30, what="the run to take the approval to its order")
            again = await run_attempt(admin, target)
            assert again["status"] == "running" and epoch(again["last_start_at"]) == resumed_at, (
                f"the approval was to reach the attempt that resumed the run, before its inactivity timeout: {again}"
            )
            # A refused attempt fails at once: one running longer than this was answered.
            await eventually(lambda: time.time() > resumed_at + ANSWERED_ATTEMPT_SECONDS, timeout=5)
        else:  # the service suspended the resumed run: at once in always-replay mode, or it waited out its inactivity
            resumed_at = epoch(run["modified_at"])
            decided_at = None
        band = await the_one_band(cli, admin, scenario.sku, first_refusal, restarted_at)
        # At the latest when the run's own attempt was seen (an answer to another SKU's call, the
        # service back, may come first: CI saw one 1.1 s before the run suspended, under load).
        assert band["end"] <= resumed_at + 1e-3, (band, restarted_at, resumed_at)
        if decided_at is not None:
            # The control: counting only commands and completions ends it at the approval's first command.
            assert band["end"] < decided_at, "it ends before the approval that followed"
    finally:
        release(held)
    if decided_at is None:
        await scenario.decide(request["po_number"], approved=True, up_to=4.0)
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"


async def test_a_band_ends_when_the_run_resumed_also_read_after_the_run_finished(
    cli: Cli, scenario: Scenario, service: RegisteredService, admin: Admin
) -> None:
    """As above, but the timeline is read once the run has taken the approval, ordered and
    finished: Restate no longer has the start of the attempt that resumed the run, and that
    attempt wrote nothing to the journal. The band still ends after the restart and by the time
    the resumed attempt was seen (plus the note's way to Restate), well before the approval."""
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    target = f"Replenish/{run_id}/run"
    request = await scenario.pending_approval()
    await waiting_for_approval(scenario, run_id)
    first_refusal, restarted_at = await an_outage_of_the_running_run(scenario, service, admin, run_id)

    async def resumed() -> float | None:
        """When Restate's live record shows the run's attempt after the restart (its start, or
        its suspension once it suspended again)."""
        run = await run_attempt(admin, target)
        at = epoch(run.get("last_start_at") if run["status"] == "running" else run.get("modified_at"))
        return at if run["status"] in ("running", "suspended") and at is not None and at >= restarted_at else None

    resumed_at = await eventually(resumed, timeout=30, what="the run's attempt after the restart")
    # The approval comes clearly later than the note could take to reach Restate, so a band that
    # ran on to the approval's first command cannot pass for one that ended at the resume.
    latest_end = resumed_at + NOTE_TIMEOUT_SECONDS
    await eventually(lambda: time.time() > latest_end + 1, timeout=10, what="a moment past the resume")
    decided_at = time.time()
    await scenario.decide(request["po_number"], approved=True, up_to=4.0)
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"
    gone = await admin.asql(f"SELECT status, last_start_at FROM sys_invocation WHERE target = '{target}'")
    assert [(r["status"], r.get("last_start_at")) for r in gone] == [("completed", None)], (
        "Restate no longer has the resumed attempt's start",
        gone,
    )

    band = await the_one_band(cli, admin, scenario.sku, first_refusal, restarted_at)
    # The control: without the service's note the band runs on to the approval's first command.
    assert band["end"] < decided_at, ("it ends before the approval that followed", band, decided_at)
    assert band["end"] <= latest_end, ("it ends when the run resumed", band, restarted_at, resumed_at)
    notes = await admin.asql(
        "SELECT created_at FROM sys_invocation "
        f"WHERE target = 'ServiceAnswered/after_failures' AND created_at >= TIMESTAMP '{sql_time(restarted_at)}'"
    )
    assert notes, "Restate keeps the service's note that it answered after the refusals"


async def test_a_supplier_answering_503_is_a_retrying_step_not_an_outage(
    cli: Cli, scenario: Scenario, operator_env: dict[str, str], tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await setup_lasting_quotes(scenario)
    await scenario.fault(down_calls=1000)  # the world's fault, not ours
    run_id = (await scenario.check())["started"]
    client = RestateClient(operator_env["REPLENISHER_INGRESS_URL"], operator_env["REPLENISHER_ADMIN_URL"])
    try:
        # The test service retries a step 4 times within about a second, then the decider asks
        # for quotes again: read the timeline while a quote step is being retried.
        async def retrying_step() -> Timeline | None:
            timeline = await load_timeline(client, scenario.sku)
            return timeline if timeline.retrying_step is not None else None

        timeline = await eventually(retrying_step, timeout=30, what="a timeline showing the quote step retried")
        assert timeline.bands == [], "no outage is drawn for a supplier's 503"
        step = timeline.retrying_step
        assert step is not None and step.name == "get_quotes" and step.end is None
        assert step.attempts is not None and step.attempts >= 1 and step.next_attempt_at is not None
        assert "503" in step.errors[-1] and "\n" not in step.errors[-1] and "Traceback" not in step.errors[-1]
        assert timeline.status.startswith("retrying get_quotes: "), timeline.status
        named = f"last error: Unavailable: supplier {scenario.supplier} answered 503 Service Unavailable to POST"
        assert "attempt" in timeline.status and named in timeline.status, timeline.status
        assert any("Traceback" in d for d in step.details), "kept for the details toggle"

        async def row_retrying() -> bool:
            rows = {r.sku: r for r in await sku_rows(client)}
            return (rows[scenario.sku].retrying or "").startswith("retrying get_quotes")

        await eventually(row_retrying, timeout=30, what="the SKUs view to say the quote step is retried")

        # The console's page from the SKU list says so too, and counts the SKU as failing.
        erp = ErpCatalogue(str(scenario.world.base_url))
        try:

            async def listed_retrying() -> bool:
                query = SkuQuery(q=scenario.sku, flag="failing")
                page, _ = await listed_page(client, query, None, time.time(), erp)
                rows = [r for r in page.rows if r.sku == scenario.sku]
                return bool(rows) and (rows[0].retrying or "").startswith("retrying get_quotes")

            await eventually(listed_retrying, timeout=30, what="the SKUs page from the list to flag the retried step")
            # Found from the invoker's own table and a read by id; the scan made when many are attempted
            # finds it too.
            monkeypatch.setattr(attempting, "MOST_IDS", 0)

            async def scanned_retrying() -> bool:
                return run_id in (await client.troubled()).retrying

            await eventually(scanned_retrying, timeout=30, what="the scan of every invocation to find the run retrying")
            monkeypatch.undo()
        finally:
            await erp.aclose()

        page = tmp_path / "run.html"
        text = await cli("timeline", scenario.sku, "--width", "160", "--html", str(page))
        assert text.code == 0, text
        assert "Traceback" not in text.out and "service down" not in text.out.split("key:")[0], text.out
        assert f"supplier {scenario.supplier} answered 503" in text.out, text.out
        html = page.read_text()
        assert "data-kind='outage'" not in html and "service down now" not in html
        assert "<details><summary>details</summary><pre>Unavailable: supplier" in html, "the traceback is folded"
        assert json.loads((await cli("timeline", scenario.sku, "--json")).out)["bands"] == []
        assert run_id == timeline.run_id
    finally:
        await client.aclose()
        ok(await scenario.world.delete(f"/faults/suppliers/{scenario.supplier}"))


# Ten CLI processes and a service restart: 42 s in CI, over the suite's 180 s on this machine loaded.
@pytest.mark.timeout(360)
@pytest.mark.slow
async def test_with_the_service_killed_the_cli_says_so_at_once_and_what_restate_accepted_runs_later(
    cli: Cli, scenario: Scenario, service: RegisteredService, admin: Admin, operator_env: dict[str, str]
) -> None:
    await setup_lasting_quotes(scenario)
    # The longest approval window: no reminder wakes the run (a call that would be refused, and
    # date the outage) while the test looks at a service down with nothing in flight.
    await scenario.configure(approval=365)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await waiting_for_approval(scenario, run_id)

    async def nothing_in_flight() -> bool:  # the run suspended in its wait, no call of this SKU running or retried
        # Only this SKU's: another test's SKUs on this session's Restate may be working at any time
        # (their own ticks); what they do to the readings below is told apart by nothing_else_refused.
        rows = await admin.asql(
            "SELECT id FROM sys_invocation WHERE status IN ('running', 'backing-off') "
            f"AND (target LIKE 'SkuAgent/{scenario.sku}/%' OR target LIKE 'Replenish/replenish-{scenario.sku}-%')"
        )
        return rows == []

    await eventually(nothing_in_flight, timeout=20, what="every invocation to suspend or end")
    service.kill()
    try:
        # Nothing is in flight (the run waits for the manager), so no refused call tells Restate;
        # the reads of its storage say the service is down all the same: they asked its
        # deployment (the code before said nothing), and that nothing can tell since when.
        async def nothing_else_refused(*own: str) -> bool:  # (else another test's timer woke a call: it dates it)
            ours = ", ".join(f"'SkuAgent/{scenario.sku}/{handler}'" for handler in ("status", *own))
            rows = await admin.asql(
                f"SELECT id FROM sys_invocation WHERE status = 'backing-off' AND target NOT IN ({ours})"
            )
            return rows == []

        for command in ("skus", "outcomes"):
            read = await cli(command)
            assert read.code == 0 and "the replenisher service is down" in read.err, read
            if await nothing_else_refused():
                assert "down, found so at " in read.err and "nothing in flight to tell since when" in read.err, read
                assert "does not answer (ConnectError)" in read.err, read

        began = time.monotonic()
        status = await cli("status", scenario.sku)
        assert status.code == 0, status
        # Its own refused read dates nothing, and is not counted as held (it was "since" the
        # read itself, and "Restate holds 1 invocation(s)": the read, before it was killed).
        if await nothing_else_refused():
            assert "the replenisher service is down, found so at " in status.err, status
            assert "Restate holds" not in status.err, status
        assert "Restate answers, the service does not" in status.err
        assert f"approval pending: {request['po_number']}" in status.out, "shown from Restate's storage"
        assert time.monotonic() - began < 25, "no 30 s hang (a CLI process start is slow on a loaded machine)"

        # The read it gave up on is not left in Restate to pile up (the kill takes a moment).
        async def no_read_left() -> bool:
            rows = await admin.asql(
                f"SELECT id FROM sys_invocation WHERE target = 'SkuAgent/{scenario.sku}/status' "
                "AND status = 'backing-off'"
            )
            return rows == []

        await eventually(no_read_left, timeout=10, what="the abandoned read to be killed")
        # With that read gone, nothing is in flight again. A deployment not on this machine is not
        # looked at; the read's own refusal then tells that the service is down now, and still
        # dates nothing.
        remote = RestateClient(operator_env["REPLENISHER_INGRESS_URL"], operator_env["REPLENISHER_ADMIN_URL"])

        async def not_on_this_machine() -> None:
            return None

        remote._deployment_silent = not_on_this_machine  # type: ignore[method-assign]
        try:
            record = await remote.sku_status(scenario.sku)
        finally:
            await remote.aclose()
        seen = remote.degraded
        assert record.active is not None and seen is not None and seen.service_down, seen
        assert "Connection refused" in (seen.error or ""), seen
        # Its own read is never counted; only another call (none, with this window) dates it.
        if await nothing_else_refused():
            assert seen.waiting_invocations == 0, seen
            assert seen.since is None and seen.found_at is not None and "found so at" in seen.line(), seen
        await eventually(no_read_left, timeout=10, what="that read to be killed too")

        alone = await nothing_else_refused()
        watch = await cli("watch", scenario.sku)
        assert watch.code == 5, watch
        assert f"Restate accepted `watch` for {scenario.sku} as invocation inv_" in watch.out, watch
        # Another test's call may be refused while the watch runs, and date the outage: look again.
        if alone and await nothing_else_refused("watch"):  # a change's own refusal dates nothing either
            assert "the replenisher service is down, found so at " in watch.out, watch
        assert "will run when the service is back" in watch.out and "fail" not in watch.out + watch.err
        # A handler without input (`check`) is found by its key too: no body is sent with it.
        check = await cli("check", scenario.sku)
        assert check.code == 5, check
        assert f"Restate accepted `check` for {scenario.sku} as invocation inv_" in check.out, check

        approve = await cli("approve", scenario.sku, "--up-to", "4.00", "--note", "while down")
        assert approve.code == 5, approve
        assert f"{request['po_number']} approved up to 4.00: Restate accepted the decision" in approve.out
        assert f"{run_id} will read the decision when the service is back" in approve.out

        timeline = await cli("timeline", scenario.sku, "--width", "160")
        assert timeline.code == 0, timeline
        assert "service down since" in timeline.out.splitlines()[0], timeline.out
        assert "service down now" in timeline.out

        unreachable = await cli("skus", env={"REPLENISHER_ADMIN_URL": f"http://127.0.0.1:{free_port()}"})
        assert unreachable.code == 3 and "Restate is unreachable" in unreachable.err, unreachable
    finally:
        service.restart()

    # What Restate accepted ran once the service was back: the decision and the watch.
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"
    assert (await scenario.status())["watch"]["watching"] is True
    outcomes = await cli("outcomes", scenario.sku, "--json")
    [decided] = [o["decision"] for o in json.loads(outcomes.out)]
    assert decided.startswith("approved up to 4.00") and "by manager (cli)" in decided and "note: while down" in decided
    assert "approved up to 4.00" in (await cli("outcomes", scenario.sku)).out


async def test_a_call_restate_paused_is_shown_by_status_and_a_check_behind_it_says_what_it_waits_for(
    cli: Cli, scenario: Scenario, service: RegisteredService, ingress: httpx.AsyncClient, admin: Admin
) -> None:
    """Restate pauses an invocation whose retries ran out (or whose journal no longer matches
    the code, or that a person paused): nothing runs it again until someone resumes it, and a
    paused exclusive call of the SKU's agent holds every later one. Here Restate really pauses
    a `check` it could not deliver while the service was down (through the admin API, as
    `restate invocations pause` does), and the service comes back."""
    await setup_lasting_quotes(scenario)
    await scenario.configure()  # the SKU's agent exists, with nothing running
    calm = await cli("status", scenario.sku)
    assert calm.code == 0 and "STOPPED" not in calm.out, calm
    held = await paused_check(scenario, service, ingress, admin)

    status = await cli("status", scenario.sku)
    assert status.code == 0, status
    stopped = next(line for line in status.out.splitlines() if line.startswith("STOPPED: "))
    assert f"`check` (SkuAgent/{scenario.sku}/check, invocation {held})" in stopped, status.out
    assert "RT0010" in stopped and "Connection refused" in stopped, "why it paused: its last failure"
    assert "every later check, message and approval for this SKU waits behind it" in status.out
    assert f"restate invocations resume {held}" in status.out
    [shown] = json.loads((await cli("status", scenario.sku, "--json")).out)["paused"]
    assert shown["id"] == held and shown["target"] == f"SkuAgent/{scenario.sku}/check" and shown["code"] == "RT0010"

    began = time.monotonic()
    check = await cli("check", scenario.sku)
    assert check.code == 6, check
    assert f"Restate holds `check` for {scenario.sku} as invocation inv_" in check.out, check
    behind = f"queued behind a paused call: Restate paused `check` (SkuAgent/{scenario.sku}/check, invocation {held})"
    assert behind in check.out, check
    assert f"restate invocations resume {held}" in check.out
    assert time.monotonic() - began < 25, "said at once, not after the 30 s read timeout"
    queued = check.out.split(" as invocation ", 1)[1].split(",", 1)[0]
    assert queued.startswith("inv_") and queued != held

    await resume(admin, held)

    async def both_ran() -> bool:
        rows = await admin.asql(
            f"SELECT id FROM sys_invocation WHERE id IN ('{held}', '{queued}') AND status = 'completed'"
        )
        return len(rows) == 2

    await eventually(both_ran, timeout=30, what="the resumed check and the one queued behind it to run")
    assert (await scenario.status())["active"] is not None, "the resumed check started the replenishment"
    after = await cli("status", scenario.sku)
    assert after.code == 0 and "STOPPED" not in after.out, after


async def test_the_consoles_paused_calls_come_from_a_recent_scan_and_are_read_again_by_id(
    scenario: Scenario,
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    admin: Admin,
    operator_env: dict[str, str],
) -> None:
    """The console's SKUs page takes the paused calls from a scan made at most every so often
    (`RecentPaused`: a scan reads every invocation Restate keeps), and from what Restate's invoker
    holds (which, on Restate 1.7.12, still holds a call it paused after failed attempts, as here). The
    calls a scan found are read again by id on every page, so a call resumed stops counting at once."""
    await setup_lasting_quotes(scenario)
    await scenario.configure()
    clock = [0.0]
    recent = RecentPaused(fresh_s=60.0, clock=lambda: clock[0])
    client = RestateClient(operator_env["REPLENISHER_INGRESS_URL"], operator_env["REPLENISHER_ADMIN_URL"])
    http = client.http

    async def counted() -> list[str]:
        return [p.id for p in (await client.troubled(recent)).paused if p.sku == scenario.sku]

    try:
        assert await counted() == [], "the first scan: nothing paused"
        held = await paused_check(scenario, service, ingress, admin)
        assert held not in await recent.ids(http), "the last scan is fresh: not made again"
        clock[0] = 61.0

        async def scanned() -> bool:
            return held in await recent.ids(http)

        await eventually(scanned, timeout=20, what="the next scan, made in the background, to find it")
        assert await counted() == [held]
        await resume(admin, held)

        async def dropped() -> bool:
            return await counted() == []

        await eventually(dropped, timeout=20, what="the resumed call to stop counting")
        assert held in await recent.ids(http), "no scan since: it was read by id and is no longer paused"
    finally:
        await recent.aclose()
        await client.aclose()


async def test_a_change_held_behind_a_paused_call_while_the_service_is_down_says_it_waits_for_the_resume(
    cli: Cli,
    scenario: Scenario,
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    admin: Admin,
    operator_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both at once: the service down and a paused `check` holding the SKU. A `check` then runs
    when the paused one is resumed, not when the service is back: exit 6, not 5."""
    await setup_lasting_quotes(scenario)
    await scenario.configure()
    try:
        held = await pause_a_held_check(scenario, service, ingress, admin, key="held-down")
        # Something else Restate keeps retrying, so it knows the service is down.
        assert (await ingress.post(f"/SkuAgent/{scenario.sku}/status/send")).status_code == 202
        await eventually(
            lambda: refused_attempts(admin, f"SkuAgent/{scenario.sku}/status"), timeout=20, what="a refused read"
        )
        # The console's reads find both from the invoker's own table and reads by id, not a scan of every
        # invocation Restate keeps; and find the same as the scan they make when many are attempted.
        client = RestateClient(operator_env["REPLENISHER_INGRESS_URL"], operator_env["REPLENISHER_ADMIN_URL"])
        try:
            by_id = (await client.health(), await client.troubled())
            monkeypatch.setattr(attempting, "MOST_IDS", 0)
            scanned = (await client.health(), await client.troubled())
            monkeypatch.undo()
        finally:
            await client.aclose()
        for health, found in (by_id, scanned):
            assert health.service_down and health.waiting_invocations >= 1 and health.since is not None, health
            assert [p.id for p in found.paused if p.sku == scenario.sku] == [held], found
        assert by_id[0].since == scanned[0].since, (by_id[0], scanned[0])
        check = await cli("check", scenario.sku)
        assert check.code == 6, check
        assert "queued behind a paused call" in check.out and f"restate invocations resume {held}" in check.out
        assert "will run when the service is back" not in check.out, check
    finally:
        service.restart()
    await resume(admin, held)


def test_status_looks_for_paused_calls_of_the_sku_its_active_run_and_its_recent_runs() -> None:
    """A run's last one-way calls (its archive's `keep`, the SKU's `finish`) outlive it: a paused
    one of an earlier run is looked for too, not only the agent's and the active run's."""

    def ended(n: int, outcome: str = "received") -> ReplenishmentResult:
        return ReplenishmentResult(run_id=f"replenish-S1-{n}", sku="S1", outcome=outcome, started_at=n, ended_at=n + 1)

    record = SkuRecord(sku="S1", outcomes=[ended(1), ended(2, "gave_up")], unresolved=ended(2, "gave_up"))
    record.active = ActiveRun(run_id="replenish-S1-3", started_at=3.0, on_hand=1, safety_stock=5)
    assert paused_keys(record) == ["S1", "replenish-S1-3", "replenish-S1-2", "replenish-S1-1"]
    assert paused_keys(SkuRecord(sku="S2")) == ["S2"]


def test_only_an_exclusive_call_of_the_agent_is_said_to_hold_the_sku() -> None:
    """A paused shared read (`status`) blocks nothing; a paused `check` or `deliver` holds every
    later exclusive call to the SKU, and a run's paused call holds nothing of the agent."""

    def paused(target: str) -> PausedCall:
        return PausedCall(id="inv_1", target=target)

    assert paused("SkuAgent/S1/check").holds_sku
    assert paused("SkuAgent/S1/deliver").holds_sku
    assert not paused("SkuAgent/S1/status").holds_sku
    assert not paused("Replenish/replenish-S1-3/run").holds_sku
    assert [paused(t).sku for t in ("SkuAgent/S1/status", "SkuAgent/S1/check", "Replenish/replenish-S1-3/run")] == [
        "S1",
        "S1",
        "S1",
    ]


def test_the_shared_handlers_named_for_the_console_are_the_agents_own() -> None:
    """The timeline module names the agent's shared handlers without importing the SDK's object;
    this keeps the two equal when a handler is added or changes kind."""
    shared = {name for name, handler in sku_agent.handlers.items() if handler.kind == "shared"}
    assert shared == AGENT_SHARED_HANDLERS
    assert "check" in sku_agent.handlers and "check" not in shared
