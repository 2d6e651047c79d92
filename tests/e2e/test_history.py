"""History grows: past its capped outcome list, a SKU's stored record stops growing.

The long form, 1,000 runs with sizes and handler latencies printed, is `python -m bench.history`.
"""

from __future__ import annotations

import pytest

from e2e.scenario import Scenario
from replenisher.domain.sku import RECENT_OUTCOMES
from replenisher.stack.admin import Admin

pytestmark = pytest.mark.e2e


async def record_bytes(admin: Admin, sku: str) -> int:
    rows = await admin.asql(f"SELECT value_utf8 FROM state WHERE service_name = 'SkuAgent' AND service_key = '{sku}'")
    return sum(len(r["value_utf8"].encode()) for r in rows)


@pytest.mark.slow
async def test_the_record_stops_growing_once_the_outcome_list_is_full(scenario: Scenario, admin: Admin) -> None:
    # Out of stock again as soon as the goods are in; suppliers answer and deliver at once.
    await scenario.setup(on_hand=0, daily_consumption=100_000, lead_days=0, reply_days=0)
    sizes: dict[int, int] = {}
    for n in range(1, RECENT_OUTCOMES + 4):
        run_id = (await scenario.check())["started"]
        assert run_id == f"replenish-{scenario.sku}-{n}"
        await scenario.decide((await scenario.pending_approval())["po_number"], approved=True)
        assert (await scenario.outcome(run_id, within=30))["outcome"] == "received"
        sizes[n] = await record_bytes(admin, scenario.sku)

    status = await scenario.status()
    assert len(status["outcomes"]) == RECENT_OUTCOMES and status["stats"]["runs"] == RECENT_OUTCOMES + 3
    full = sizes[RECENT_OUTCOMES]
    assert sizes[RECENT_OUTCOMES + 3] <= full * 1.05, sizes
    assert sizes[RECENT_OUTCOMES + 3] < 64_000
