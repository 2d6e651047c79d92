"""Retention, through the real stack: Restate holds the windows the service set (not its one-day
default), and once it has dropped a finished run's journal and the run itself, as it does when a
window lapses, the run's turns and decisions are still read, from its archive.

`test_operator_cli.py::test_when_restate_has_dropped_the_journal_the_timeline_says_so_and_shows_what_is_kept`
drops a journal the same way and shows what the timeline then builds from the run's own history and,
once the run is gone too, from the SKU's record of its outcome; this one shows the archive keeps
every turn and who decided what, which neither of those holds.
"""

from __future__ import annotations

import json

import httpx
import pytest
from operator_support import Cli, setup_lasting_quotes

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin
from replenisher.stack.runtime import RestateRuntime
from support import HAPPY_PATH, RegisteredService, eventually

pytestmark = pytest.mark.e2e


async def test_restate_holds_the_windows_the_service_set(
    restate_runtime: RestateRuntime, service: RegisteredService
) -> None:
    async with httpx.AsyncClient(base_url=restate_runtime.admin_url, timeout=30) as admin:
        for name in ("SkuAgent", "Replenish", "RunArchive", "AuditLog", "ServiceAnswered", "SkuList"):
            service = (await admin.get(f"/services/{name}")).json()
            assert (service["journal_retention"], service["idempotency_retention"]) == ("14d", "14d"), service
        replenish = (await admin.get("/services/Replenish")).json()
    assert replenish["workflow_completion_retention"] == "35d", replenish


async def test_a_finished_runs_turns_and_decisions_are_read_from_its_archive_after_its_journal_is_gone(
    cli: Cli, scenario: Scenario, restate_runtime: RestateRuntime, admin: Admin
) -> None:
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"

    async def archived() -> bool:
        rows = await admin.asql(
            f"SELECT service_key FROM state WHERE service_name = 'RunArchive' AND service_key = '{run_id}'"
        )
        return bool(rows)

    await eventually(archived, timeout=30, what="the run's archive handed to its RunArchive object")
    [row] = await admin.asql(f"SELECT id FROM sys_invocation WHERE target = 'Replenish/{run_id}/run'")
    async with httpx.AsyncClient(base_url=restate_runtime.admin_url, timeout=30) as client:
        # What the windows do when they lapse, now: the journal goes, then the run with its state.
        for what in ("purge-journal", "purge"):
            dropped = await client.patch(f"/invocations/{row['id']}/{what}")
            assert dropped.is_success, dropped.text
    assert await admin.asql(f"SELECT id FROM sys_invocation WHERE id = '{row['id']}'") == []
    assert await scenario.run_view(run_id) == {"state": None, "waiting": None}, "the run's own state is gone"

    replayed = await cli("replay", run_id, "--json")
    assert replayed.code == 0, replayed
    [report] = json.loads(replayed.out)["runs"]
    assert report["recorded_outcome"] == "received" and report["diverged"] == 0
    assert report["turns"] == len(HAPPY_PATH), report
    text = await cli("replay", run_id, "--side-by-side")
    assert text.code == 0, text
    assert f"{run_id}: the recorded run beside its replay" in text.out
    for tool in HAPPY_PATH:
        assert tool in text.out, f"turn {tool} not read back from the archive"
