"""Runs really suspend, by Restate's own records (sys_invocation, sys_journal).

`make test` runs the end-to-end tests twice: with Restate's inactivity timeout at 2 s, and in
the always-replay pass (REPLENISHER_TEST_ALWAYS_REPLAY=1) at 0 s, where an invocation is
suspended as soon as it awaits something that is not there yet and is replayed from its
journal when it comes. For each wait of a run this test reads how long after the wait's last
journal entry Restate marked the invocation suspended (`modified_at` while its status is
`suspended`). The always-replay pass must show every wait suspended at once; the normal
pass, run by the same test, is the control that the measure tells the two apart (there a
wait suspends only after the 2 s timeout).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import pytest

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin
from support import RESTATE_TEST_ENV, eventually

pytestmark = pytest.mark.e2e

ALWAYS_REPLAY = bool(os.environ.get("REPLENISHER_TEST_ALWAYS_REPLAY"))


def instant(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


async def suspension(admin: Admin, run_id: str) -> dict[str, Any]:
    """Restate's record of the run's invocation, once it is suspended, with the delay since its last entry."""
    target = f"Replenish/{run_id}/run"

    async def suspended() -> dict[str, Any] | None:
        rows = await admin.asql(
            "SELECT id, status, modified_at, suspended_waiting_future_json AS waiting_on "
            f"FROM sys_invocation WHERE target = '{target}'"
        )
        return rows[0] if rows and rows[0]["status"] == "suspended" else None

    row = await eventually(suspended, timeout=20, interval=0.05, what=f"{target} to be suspended")
    last = await admin.asql(f"SELECT max(appended_at) AS at FROM sys_journal WHERE id = '{row['id']}'")
    return {**row, "delay": instant(row["modified_at"]) - instant(last[0]["at"])}


async def test_every_wait_suspends_the_run_in_restate(scenario: Scenario, admin: Admin) -> None:
    assert RESTATE_TEST_ENV["RESTATE_WORKER__INVOKER__INACTIVITY_TIMEOUT"] == ("0s" if ALWAYS_REPLAY else "2s")
    # The supplier's reply and the goods take long enough (seconds) to be seen waiting for in
    # either pass, even on a loaded machine where one look at the run takes a second.
    await scenario.setup(reply_days=16, lead_days=24)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    await scenario.waiting_for(run_id, "wait_for_approval", within=30)
    seen = [("wait_for_approval", await suspension(admin, run_id))]
    await scenario.decide(request["po_number"], approved=True)
    if ALWAYS_REPLAY:
        # Only here is suspension immediate enough to catch within the reply's and the goods' lead.
        for tool in ("wait_for_supplier_reply", "wait_for_goods"):
            await scenario.waiting_for(run_id, tool, within=30)
            seen.append((tool, await suspension(admin, run_id)))
    outcome = await scenario.outcome(run_id, within=90)
    assert outcome["outcome"] == "received"

    for tool, row in seen:
        assert row["waiting_on"], f"{tool}: suspended without saying what it waits for"
        if ALWAYS_REPLAY:
            assert row["delay"] < 1.0, f"{tool}: suspended {row['delay']:.2f}s after its last entry, not at once"
        else:
            # The control: with a 2 s inactivity timeout Restate waits before suspending.
            assert row["delay"] >= 1.5, f"{tool}: suspended after {row['delay']:.2f}s with a 2 s timeout"
