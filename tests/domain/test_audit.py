"""The audit log's rules: complete under a flood, chained so a change shows, and exported safely."""

from __future__ import annotations

import csv
import io
import json

import pytest
from pydantic import ValidationError

from replenisher.domain.audit import (
    PAGE_SIZE,
    AuditDay,
    AuditEntry,
    AuditPage,
    AuditRecord,
    check_chain,
    day_of,
    to_csv,
    to_json,
)

AT = 1_796_461_200.0  # 2026-12-05T09:00:00Z


def record(n: int = 0, **changes: object) -> AuditRecord:
    values: dict[str, object] = {"at": AT + n, "event": "approval", "who": "ana", "via": "console"}
    values |= {"source": "10.0.0.7", "what": f"PO-SKU-1-{n} 100 x 4.00 from acme", "outcome": "done"}
    return AuditRecord.model_validate(values | changes)


def fill(count: int) -> tuple[AuditDay, list[AuditPage]]:
    day, pages = AuditDay(day=day_of(AT)), [AuditPage()]
    for n in range(count):
        if pages[-1].full:
            pages.append(AuditPage())
        day.append(pages[day.current_page], record(n))
    return day, pages


def test_a_flood_keeps_every_entry_in_full_pages_and_a_true_total() -> None:
    count = PAGE_SIZE * 2 + 7
    day, pages = fill(count)
    assert day.total == count and day.pages == 3 == len(pages)
    assert [len(p.entries) for p in pages] == [PAGE_SIZE, PAGE_SIZE, 7]
    entries = [e for p in pages for e in p.entries]
    assert [e.seq for e in entries] == list(range(count))
    assert check_chain(entries) == []
    assert day.last_digest == entries[-1].digest
    with pytest.raises(ValueError, match="page is full"):
        day.append(pages[0], record())


def test_a_changed_a_removed_and_a_swapped_entry_each_break_the_chain() -> None:
    _, [page] = fill(5)
    entries = page.entries
    changed = [*entries[:2], entries[2].model_copy(update={"who": "paul"}), *entries[3:]]
    assert [(b.seq, b.problem) for b in check_chain(changed)] == [(2, "was changed after it was written")]
    removed = [*entries[:2], *entries[3:]]
    assert {b.problem for b in check_chain(removed)} >= {"does not follow the entry before it"}
    swapped = [entries[0], entries[2], entries[1], *entries[3:]]
    assert any("belongs" in b.problem for b in check_chain(swapped))
    assert check_chain(entries) == []  # the control


def test_outside_text_is_bounded_and_cannot_run_in_a_spreadsheet() -> None:
    with pytest.raises(ValidationError):
        record(who="x" * 201)
    with pytest.raises(ValidationError):
        record(at=float("nan"))
    day, page = AuditDay(day=day_of(AT)), AuditPage()
    typed = '=HYPERLINK("http://evil.example","click")'
    day.append(page, record(event="sign_in_failed", who=typed, outcome="refused", reason="+1 wrong password"))
    rows = list(csv.reader(io.StringIO(to_csv(page.entries))))
    header, [row] = rows[0], rows[1:]
    cells = dict(zip(header, row, strict=True))
    assert cells["who"] == "'" + typed and cells["reason"] == "'+1 wrong password"
    assert cells["time_utc"] == "2026-12-05T09:00:00+00:00" and cells["day"] == "2026-12-05"
    assert cells["event"] == "sign_in_failed" and cells["seq"] == "0"
    [back] = json.loads(to_json(page.entries))
    assert AuditEntry.model_validate(back) == page.entries[0]  # JSON keeps the exact text
