"""Ten years of monthly replenishments of one SKU: what is learnt early is acted on much later.

The SKU's record (`SkuRecord`: consider, finish) carries the memory from run to run, as the
SkuAgent does; each run gets the memory's brief at its start, exactly as `RunRequest.memory`.
- Early on, the cheapest supplier ("cheapo") never replies, even when chased, and delivers four
  business days after the lead time it quoted; once the memory judges it unreliable, the offline
  policy buys from "acme" (within 10% of it).
- In March 2026 acme's reply promises 10% off the next order from January 2027. Nothing is
  asked before then; the first run in 2027, ten runs later, asks for it in the quote request,
  acme's quote shows it, the order is placed at the lower price, and the promise is settled.
  The simulated world's suppliers do not read a quote request's note, so acme keeps its word
  the world's way: its prices are 10% lower (a `price_rise_pct` of -10) for that one run.

The world is the simulated world's own core in memory (`replenisher.in_memory.world`), so its
suppliers count lead times in business days: a supplier six of them late is past the agent's
three overdue waits and is cancelled, hence cheapo's four.
- The model's prompt at that point recalls both. The record stays small throughout.
"""

from __future__ import annotations

from datetime import UTC, datetime

from replenisher.deciders.prompt import render_memory
from replenisher.domain.documents import StockLevel
from replenisher.domain.policy import OfflinePolicy
from replenisher.domain.sku import SkuRecord
from replenisher.in_memory.engine import Run, run_in_memory
from replenisher.in_memory.world import DAY, SKU, START, Clock, Inbox, MemoryWorld, SupplierSpec

SUPPLIERS = ["acme", "bolt", "cheapo"]
YEARS = 10
PROMISE = (
    "Thank you, we confirm your order. Delivery in 5 days. As a loyal customer you will get 10% off "
    "your next order from January 2027."
)


def month(run: int) -> datetime:
    return datetime.fromtimestamp(START + (run - 1) * 30.5 * DAY, UTC)


async def test_a_promise_and_a_bad_record_are_acted_on_many_months_and_runs_later() -> None:
    clock = Clock()
    world = MemoryWorld(
        clock,
        {
            "acme": SupplierSpec(price=4.0),
            "bolt": SupplierSpec(price=5.0),
            "cheapo": SupplierSpec(price=3.9, quiet=True, late_days=4),
        },
    )
    record = SkuRecord(sku=SKU)
    runs: list[Run] = []
    sizes: list[int] = []
    requests_of: dict[int, list] = {}
    first_2027 = next(n for n in range(1, YEARS * 12 + 1) if month(n).year == 2027)
    for n in range(1, YEARS * 12 + 1):
        world.set_faults("acme", price_rise_pct=-10.0 if n == first_2027 else 0.0)
        clock.now = max(clock.now, START + (n - 1) * 30.5 * DAY)
        stock = StockLevel(sku=SKU, on_hand=5, safety_stock=20, target_stock=100, suppliers=SUPPLIERS)
        started = record.consider(stock, clock.now)
        assert started is not None and started.run_id == f"replenish-{SKU}-{n}"
        brief = record.memory.brief()
        text = PROMISE if n == 3 else None
        before = len(world.quote_requests)
        run = await run_in_memory(
            OfflinePolicy(), world, Inbox(world, reply_text=text), suppliers=SUPPLIERS, memory=brief, run_number=n
        )
        assert run.result.outcome == "received", (n, run.result.detail)
        assert record.finish(run.result)
        requests_of[n] = [r for s, r in world.quote_requests[before:] if s == "acme"]
        runs.append(run)
        sizes.append(len(record.model_dump_json()))

    bought = [r.result.supplier for r in runs]
    # Cheapest first; after two late, chased orders the memory calls cheapo unreliable.
    assert bought[:2] == ["cheapo", "cheapo"]
    assert set(bought[2:]) == {"acme"}
    assert "cheapo is 3.90 but unreliable" in next(
        d.reason for d in runs[2].decisions if d.tool == "draft_purchase_order"
    )

    # The promise, made in run 3 (March 2026), is recalled in the first run of 2027 and not before.
    assert first_2027 - 3 >= 9 and month(first_2027).month == 1
    asked = [n for n, requests in requests_of.items() if any(r.note for r in requests)]
    assert asked == [first_2027]
    assert requests_of[first_2027][0].note == (
        f"Please apply the 10% discount on this order that you promised in your reply about PO-{SKU}-3-1 "
        f"(replenish-{SKU}-3)."
    )
    assert runs[first_2027 - 1].result.unit_price == 3.6
    assert {r.result.unit_price for i, r in enumerate(runs, 1) if i > 2 and i != first_2027} == {4.0}
    acme = record.memory.suppliers["acme"]
    assert acme.promises_kept == 1 and record.memory.brief().promises == []

    # What a model is told, just before the discount is asked for.
    before = runs[first_2027 - 1].state.memory
    assert before is not None
    prompt = render_memory(before)
    assert "acme: 10% off the next order (reply about PO-SKU-H1-3-1 (replenish-SKU-H1-3))" in prompt
    assert "- cheapo: reliability" in prompt and "(POOR)" in prompt

    # Bounded: the record grows while its summaries fill, then stays put for the years after.
    assert record.memory.runs == YEARS * 12 and len(record.outcomes) == 20
    settled = sizes[5 * 12 :]
    assert max(settled) - min(settled) < 0.05 * min(settled), sizes
    assert max(sizes) < 60_000, max(sizes)
