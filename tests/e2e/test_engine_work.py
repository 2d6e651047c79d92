"""The bench's count of Restate's work per replenishment (`bench.engine_work`), checked on the real
stack against a replenishment whose every invocation the test can name."""

from __future__ import annotations

from typing import Any

import pytest
from bench.engine_work import engine_work, keyed_by

from e2e.scenario import Scenario
from support import eventually

pytestmark = pytest.mark.e2e

# One replenishment's invocations, by whom: from outside, the check that starts it and the three
# messages (the approval, the supplier's reply, the goods), each delivered to the SKU; the SKU sends
# its run each message and puts its part on the SKU list when the run starts and ends; the run puts
# each of its three waits on the list, archives itself, writes the day's audit log once, and tells the
# SKU it has finished.
KEPT = {"SkuAgent/check": 1, "SkuAgent/deliver": 3, "SkuAgent/finish": 1, "Replenish/run": 1,
        "Replenish/deliver": 3, "RunArchive/keep": 1}  # fmt: skip
NOT_KEPT = {"SkuList/put": 2, "SkuList/put_wait": 3, "AuditLog/append": 1}


async def test_the_bench_counts_every_invocation_a_replenishment_makes_not_only_those_restate_keeps(
    scenario: Scenario, admin: Any
) -> None:
    run_id = await scenario.approved_run()
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"
    where = keyed_by(scenario.sku)

    async def settled() -> dict[str, int] | None:
        # Every invocation kept for the run done, the SKU's `finish` among them: nothing more will be sent.
        rows = await admin.asql(
            f"SELECT target_service_name, target_handler_name, status FROM sys_invocation WHERE {where}"
        )
        if not rows or any(r["status"] != "completed" for r in rows):
            return None
        kept: dict[str, int] = {}
        for r in rows:
            name = f"{r['target_service_name']}/{r['target_handler_name']}"
            kept[name] = kept.get(name, 0) + 1
        return kept if "SkuAgent/finish" in kept else None

    kept = await eventually(settled, timeout=30, what="every kept invocation of the run done")
    # The test's own reads of the SKU's status (polling for the approval and the outcome) are invocations
    # from outside too, kept, and counted: the bench's load generator makes none.
    reads = kept.pop("SkuAgent/status", 0)
    assert kept == KEPT
    figures = await engine_work(admin, scenario.sku, 1)
    assert figures["invocations_per_replenishment"] == sum(KEPT.values()) + reads
    assert figures["invocations_made_per_replenishment"] == sum(KEPT.values()) + sum(NOT_KEPT.values()) + reads
    assert figures["journal_entries_per_replenishment"] > figures["invocations_made_per_replenishment"]
