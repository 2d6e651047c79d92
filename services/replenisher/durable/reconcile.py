"""Reconciliation: settling a run that ended with an order that may exist.

A run whose order's answer was lost (or whose supplier went away) ends `unknown`, never
`failed`: the supplier may hold the order. Its SKU then asks the supplier about the PO by
number (at its next check, and on its own timer: `SkuAgent.reconcile_due`). Found: a new run
follows the order up. Not found: the old run's outcome becomes gave_up and buying may start
again. Supplier still away, or its answer differs from the PO: the next attempt asks again.
"""

from __future__ import annotations

from pydantic import BaseModel
from restate import ObjectContext
from restate.exceptions import TerminalError

from replenisher.domain.documents import OrderAck, StockLevel
from replenisher.domain.ports import MALFORMED
from replenisher.domain.security_log import supplier_source
from replenisher.domain.sku import SkuRecord
from replenisher.domain.tools.vetting import ack_mismatches
from replenisher.durable.clock import journaled_time
from replenisher.durable.contracts import DELIVER_TO_RUN, AdoptedOrder, Message
from replenisher.durable.probes import crash_point, hold_point
from replenisher.durable.runs import start_run
from replenisher.durable.steps import step
from replenisher.loop import names
from replenisher.wiring import wiring


class OrderLookup(BaseModel):
    ack: OrderAck | None


def reconcilable(record: SkuRecord) -> bool:
    """Whether `reconcile` has an order to look up (and so journals steps of its own)."""
    unresolved = record.unresolved
    return unresolved is not None and unresolved.po is not None and record.active is None


async def reconcile(ctx: ObjectContext, record: SkuRecord, stock: StockLevel) -> str | None:
    """Ask the supplier about the unresolved run's PO, and settle it by the answer.

    Found: a new run follows the order up (its id is returned). Not found: the old run's
    outcome becomes gave_up and buying may start again. Supplier still away, or its answer
    differs from the PO (a security event on the record): next check.
    """
    if not reconcilable(record):
        return None
    unresolved = record.unresolved
    assert unresolved is not None and unresolved.po is not None
    po = unresolved.po

    async def look_up() -> OrderLookup:
        return OrderLookup(ack=await wiring().world.suppliers.find_order(po.supplier, po.po_number))

    try:
        lookup = await step(ctx, names.reconcile(po.po_number), OrderLookup, look_up)
    except TerminalError as e:
        if MALFORMED in e.message:
            at = await journaled_time(ctx)
            record.security.record(
                supplier_source(po.supplier), f"reconcile: {e.message}", at, run_id=unresolved.run_id
            )
        return None
    if lookup.ack is None:
        record.settle_unresolved("gave_up", f"reconciled: {po.supplier} holds no order for {po.po_number}")
        return None
    # Kill points for the crash matrix: the lookup is journaled, the follow-up not yet sent / just sent.
    crash_point(ctx.key(), names.ADOPT, "before")
    await hold_point(ctx.key(), names.ADOPT, "before")
    now = await journaled_time(ctx)
    wrong = ack_mismatches(po, lookup.ack)
    if wrong:
        # Not the order we placed, or not what the supplier should say about it: nothing is
        # adopted (no follow-up run, no new buying); the manager sees why on the SKU's record,
        # and the next check asks again.
        event = f"reconcile: the supplier's answer about {po.po_number} differs from the PO: {'; '.join(wrong)}"
        record.security.record(supplier_source(po.supplier), event, now, run_id=unresolved.run_id)
        return None
    run, routed = record.follow_up(now)
    adopt = AdoptedOrder(po=po, ack=lookup.ack, from_run=unresolved.run_id, progress=unresolved.progress)
    await start_run(ctx, run.run_id, record, stock, now, adopt)
    for message in routed:
        forwarded = Message(
            event=message.event, seq=message.seq, payload=message.payload, sender=message.sender, arrived_at=message.at
        )
        DELIVER_TO_RUN.send(ctx, run.run_id, forwarded)
    crash_point(ctx.key(), names.ADOPT, "after")
    return run.run_id
