"""The audit log: every decision, refused attempt, sign-in and change, as auditors read it.

Append-only and complete: nothing is dropped, however many entries a day brings (a day's log
is pages of `PAGE_SIZE` entries; a full page stays as it is and the next one starts). Each entry
carries the digest of the one before it, so an entry changed or taken out afterwards (through
Restate's state editing, say) shows as a broken chain when the log is read.

Every field that came from outside (a typed user name, a supplier's id, a reason) is data: it is
bounded in length here, and made harmless for a spreadsheet when exported as CSV.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PAGE_SIZE = 500
GENESIS = "0" * 64

AuditEvent = Literal[
    "approval",
    "rejection",
    "approval_refused",
    "sign_in",
    "sign_in_failed",
    "sign_out",
    "matrix_changed",
    "matrix_refused",
    "settings_changed",
    "delegation",
    "personal_token_made",
]
Outcome = Literal["done", "refused", "failed"]


def _bounded(limit: int) -> ConfigDict:
    return ConfigDict(extra="forbid", frozen=True, str_max_length=limit, allow_inf_nan=False)


class AuditRecord(BaseModel):
    """What happened, as the part that saw it reports it (before it is chained into the log)."""

    model_config = _bounded(2000)

    at: float = Field(description="epoch seconds")
    event: AuditEvent
    who: str = Field(max_length=200, description="the person's id, or what was typed for an unknown one")
    via: str = Field(max_length=100, description="the channel: console, cli, inbox (the door's party), ...")
    source: str = Field(default="", max_length=100, description="the address or party it came from")
    what: str = Field(max_length=1000, description="the PO, amount, file or setting concerned")
    outcome: Outcome
    reason: str = Field(default="", max_length=1000)
    run_id: str | None = Field(default=None, max_length=300)
    acting_for: str | None = Field(default=None, max_length=200)
    limit: float | None = Field(default=None, description="the approver's limit at the time")


class AuditEntry(AuditRecord):
    """A record in the log: its place and the chain of digests that holds the log together."""

    seq: int = Field(ge=0, description="its number in the day's log, from 0")
    prev: str = Field(min_length=64, max_length=64)
    digest: str = Field(min_length=64, max_length=64)


def entry_digest(record: AuditRecord, seq: int, prev: str) -> str:
    body = record.model_dump(mode="json")
    canonical = json.dumps({"seq": seq, "prev": prev, **body}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def chained(record: AuditRecord, seq: int, prev: str) -> AuditEntry:
    return AuditEntry(**record.model_dump(), seq=seq, prev=prev, digest=entry_digest(record, seq, prev))


class AuditPage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entries: list[AuditEntry] = Field(default_factory=list)

    @property
    def full(self) -> bool:
        return len(self.entries) >= PAGE_SIZE


class AuditDay(BaseModel):
    """A day's log as its index: how many entries, in how many pages, and the last digest."""

    model_config = ConfigDict(extra="forbid")

    day: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    total: int = 0
    last_digest: str = GENESIS

    @property
    def current_page(self) -> int:
        return self.total // PAGE_SIZE

    @property
    def pages(self) -> int:
        return (self.total + PAGE_SIZE - 1) // PAGE_SIZE

    def append(self, page: AuditPage, record: AuditRecord) -> AuditEntry:
        """Chain `record` onto the day, into `page` (the current page, as read). Pure: the caller stores both."""
        if page.full:
            raise ValueError("the page is full: append to the day's current page")
        entry = chained(record, self.total, self.last_digest)
        page.entries.append(entry)
        self.total += 1
        self.last_digest = entry.digest
        return entry


def day_of(at: float) -> str:
    """The UTC date an entry is filed under (auditors' days are not the site's business days)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")


class ChainBreak(BaseModel):
    seq: int
    problem: str


def check_chain(entries: list[AuditEntry], start: str = GENESIS) -> list[ChainBreak]:
    """Where a day's entries, in order, do not hold together: a changed, missing or moved entry."""
    breaks: list[ChainBreak] = []
    prev = start
    for expected_seq, entry in enumerate(entries):
        record = AuditRecord(**entry.model_dump(exclude={"seq", "prev", "digest"}))
        if entry.seq != expected_seq:
            breaks.append(ChainBreak(seq=entry.seq, problem=f"found where entry {expected_seq} belongs"))
        if entry.prev != prev:
            breaks.append(ChainBreak(seq=entry.seq, problem="does not follow the entry before it"))
        if entry_digest(record, entry.seq, entry.prev) != entry.digest:
            breaks.append(ChainBreak(seq=entry.seq, problem="was changed after it was written"))
        prev = entry.digest
    return breaks


# --- export ----------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "time_utc", "day", "seq", "event", "outcome", "who", "acting_for", "limit", "via", "source", "what",
    "reason", "run_id", "digest",
)  # fmt: skip


def _cell(value: object) -> str:
    """A spreadsheet must show an outside value as text, never run it as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def to_csv(entries: list[AuditEntry]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for e in entries:
        when = datetime.fromtimestamp(e.at, UTC)
        row = (
            when.isoformat(timespec="seconds"), day_of(e.at), e.seq, e.event, e.outcome, e.who, e.acting_for,
            "" if e.limit is None else f"{e.limit:.2f}", e.via, e.source, e.what, e.reason, e.run_id, e.digest,
        )  # fmt: skip
        writer.writerow([_cell(v) for v in row])
    return out.getvalue()


def to_json(entries: list[AuditEntry]) -> str:
    return json.dumps([e.model_dump(mode="json") for e in entries], indent=1) + "\n"
