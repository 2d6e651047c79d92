"""`replenisher status`'s security lines: the exact total, what was collapsed or dropped, the latest."""

from __future__ import annotations

from tests.domain.factories import T0, stock

from replenisher.cli import security_lines
from replenisher.domain.documents import Sender
from replenisher.domain.sku import ROUTED_PER_SENDER, SkuRecord

RUN = "replenish-SKU-1-1"


def test_status_shows_the_total_the_collapsed_and_dropped_counts_and_the_latest_entries() -> None:
    record = SkuRecord(sku="SKU-1")
    assert security_lines(record) == [], "nothing to say when nothing was refused"
    assert record.consider(stock(on_hand=5), T0) is not None
    for i in range(60):
        record.security.record("supplier:bolt", f"reply about PO-{i} refused", T0 + i, run_id=RUN)
    rival = Sender(party="supplier:bolt")
    for i in range(ROUTED_PER_SENDER + 3):  # three past the cap: one entry, counted three times
        record.route("supplier-reply", {"po_number": f"PO-{i}", "supplier": "bolt", "text": "x"}, T0 + 100 + i, rival)
    record.security.record("manager", "approval refused: token does not match", T0 + 300, run_id=RUN)

    lines = security_lines(record, shown=3)
    assert lines[0] == "security events: 64 (refused, nothing changed; latest first):"
    assert lines[1] == "  (2 repeats collapsed into kept entries; 12 dropped to keep 50 entries (supplier:bolt 12))"
    assert lines[2].endswith(f"{RUN} manager: approval refused: token does not match")
    assert "supplier:bolt (3 times, first 1970-01-12 13:50:00 UTC): supplier-reply message kept, not routed" in lines[3]
    assert "supplier:bolt: reply about PO-59 refused" in lines[4]
    assert len(lines) == 5
