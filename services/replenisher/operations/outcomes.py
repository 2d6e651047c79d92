"""How recent replenishments ended, with who decided on each."""

from __future__ import annotations

from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.operations.records import records_of
from replenisher.operations.restate.client import RestateClient
from replenisher.timeline.model import decision_from_approval


class EndedRun(ReplenishmentResult):
    """A run's outcome, and the manager's decision on it as one line (if the run still has it)."""

    decision: str | None = None


async def recent_outcomes(client: RestateClient, sku: str | None, limit: int) -> list[EndedRun]:
    """The last `limit` outcomes of the SKU (or of every SKU), the newest first."""
    records = await records_of(client, sku)
    results = sorted((o for r in records for o in r.outcomes), key=lambda o: o.ended_at, reverse=True)[:limit]
    # Who decided lives in the run's state, which Restate keeps for its retention period.
    states = await client.run_states([o.run_id for o in results])
    decisions = {run: d.line() for run, st in states.items() if (d := decision_from_approval(st.approval)) is not None}
    return [EndedRun(**o.model_dump(), decision=decisions.get(o.run_id)) for o in results]
