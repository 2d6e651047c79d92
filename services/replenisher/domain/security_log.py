"""The security log: what the rules refused, bounded in space, exact in its count.

One type serves both the run's state and the SKU's record. Whoever floods it (one supplier
sending the run junk it must refuse, a model whose every choice is refused) must not be able
to blind it: the next event from anyone else is still recorded and shown, and the total says
how many there were.

- `total` counts every event ever recorded, exactly.
- `recent` keeps at most `SECURITY_LOG_BOUND` entries, oldest first. Each entry is about one
  `source` (who the event is about: the sender party such as `supplier:acme`, `manager`,
  `warehouse`, `operator`; `decider` for a refused model choice; `supplier:<id>` for a
  supplier whose answer or quote broke a rule).
- Collapse: an event with the same source and text (and run, on the SKU's record) as a kept
  entry adds to that entry: its count goes up, its last time moves, and it becomes the newest.
- Eviction, when more than the bound are kept: the oldest entry of the source that holds the
  most entries goes (of those tied, the one whose oldest entry is oldest), and its events are
  counted in `dropped` under its source. A flood from one source therefore evicts only its
  own entries while fewer sources than the bound have entries. `dropped` names at most
  `DROPPED_SOURCES` sources; events of any further source count under `OTHER_SOURCES`.

So `total == sum(entry.count) + sum(dropped.values())`, always.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field, model_validator

SECURITY_LOG_BOUND = 50
EVENT_TEXT_LIMIT = 300
SOURCE_LIMIT = 100
DROPPED_SOURCES = 50
UNKNOWN_SOURCE = "unknown"
"""Events recorded before sources were kept, or from a message too broken to say who sent it."""
DECIDER_SOURCE = "decider"
OTHER_SOURCES = "other sources"
LOST_BEFORE_FORWARDING = "events the run's bounded log dropped before its SKU heard of them (texts not kept)"


def supplier_source(supplier: str) -> str:
    """The source of an event about a supplier's answer, named as the supplier's party is."""
    return f"supplier:{supplier}"


class SecurityEntry(BaseModel):
    """One kept event, or several alike collapsed into one (`count`)."""

    seq: int = Field(ge=1, description="the log's running number of this entry's first event: unique in the log")
    source: str = Field(max_length=SOURCE_LIMIT)
    what: str = Field(max_length=EVENT_TEXT_LIMIT)
    count: int = Field(default=1, ge=1)
    first_at: float
    last_at: float
    run_id: str | None = Field(default=None, description="the run it happened in (on the SKU's record)")

    @property
    def collapsed(self) -> int:
        """Events folded into this entry after its first."""
        return self.count - 1


class SecurityNote(BaseModel):
    """Events of one kind recorded since a point, with their count: what a run tells its SKU."""

    source: str = Field(default=UNKNOWN_SOURCE, max_length=SOURCE_LIMIT)
    what: str = Field(max_length=EVENT_TEXT_LIMIT)
    count: int = Field(default=1, ge=1)
    first_at: float | None = Field(default=None, description="None: the receiver's clock stands in")
    last_at: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_text(cls, data: Any) -> Any:
        # Runs on code from before counts were kept sent each event as bare text.
        if isinstance(data, str):
            return {"what": data[:EVENT_TEXT_LIMIT]}
        return data


class SecurityLog(BaseModel):
    total: int = Field(default=0, ge=0, description="every event ever recorded")
    recent: list[SecurityEntry] = Field(default_factory=list, description="the kept entries, oldest first")
    dropped: dict[str, int] = Field(
        default_factory=dict, description="events in entries evicted to keep the bound, per source"
    )

    def record(
        self,
        source: str,
        what: str,
        at: float,
        *,
        count: int = 1,
        first_at: float | None = None,
        run_id: str | None = None,
    ) -> None:
        """Record `count` events alike (`first_at` to `at`); collapse into a kept entry, then keep the bound."""
        if count < 1:
            return
        source = source[:SOURCE_LIMIT]
        what = what[:EVENT_TEXT_LIMIT]
        first = at if first_at is None else min(first_at, at)
        self.total += count
        same = next(
            (i for i, e in enumerate(self.recent) if e.source == source and e.what == what and e.run_id == run_id),
            None,
        )
        if same is not None:
            entry = self.recent.pop(same)
            entry.count += count
            entry.first_at = min(entry.first_at, first)
            entry.last_at = max(entry.last_at, at)
            self.recent.append(entry)
            return
        seq = self.total - count + 1
        self.recent.append(
            SecurityEntry(seq=seq, source=source, what=what, count=count, first_at=first, last_at=at, run_id=run_id)
        )
        while len(self.recent) > SECURITY_LOG_BOUND:
            self._evict()

    def take(self, notes: list[SecurityNote], at: float, run_id: str | None = None) -> None:
        """Record what another log sent (a run's news, on its SKU's record), counts and times as sent."""
        for note in notes:
            last = note.last_at if note.last_at is not None else at
            first = note.first_at if note.first_at is not None else last
            self.record(note.source, note.what, last, count=note.count, first_at=first, run_id=run_id)

    def _evict(self) -> None:
        held = Counter(e.source for e in self.recent)
        most = max(held.values())
        # The list is oldest first: the first entry of a most-holding source is that source's
        # oldest, and of the sources tied, the one holding the oldest entry goes first.
        i = next(i for i, e in enumerate(self.recent) if held[e.source] == most)
        entry = self.recent.pop(i)
        bucket = self.bucket(entry.source)
        self.dropped[bucket] = self.dropped.get(bucket, 0) + entry.count

    def bucket(self, source: str) -> str:
        """Where `dropped` counts a source's events: its own name while there is room for it."""
        if source in self.dropped or len(self.dropped) < DROPPED_SOURCES:
            return source
        return OTHER_SOURCES

    # --- figures the views show -------------------------------------------------------------

    @property
    def collapsed(self) -> int:
        """Events folded into a kept entry after that entry's first event."""
        return sum(e.collapsed for e in self.recent)

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    def latest(self, n: int) -> list[SecurityEntry]:
        """The `n` newest kept entries, newest first."""
        return self.recent[-n:][::-1] if n > 0 else []

    def texts(self) -> list[str]:
        """The kept entries' texts, oldest first (each once, however many it stands for)."""
        return [e.what for e in self.recent]

    def summary(self) -> str:
        """One line: the total, and how much of it is collapsed or dropped."""
        parts = [f"{self.total} recorded"]
        if self.collapsed:
            parts.append(f"{self.collapsed} collapsed into repeats")
        if self.dropped:
            by = ", ".join(f"{source} {n}" for source, n in sorted(self.dropped.items(), key=lambda kv: -kv[1]))
            parts.append(f"{self.dropped_total} dropped from the kept list ({by})")
        return "; ".join(parts)

    # --- what changed since an earlier reading --------------------------------------------

    def reading(self) -> SecurityLog:
        """This log as it is now, for `news_since` later: its entries copied (`record` grows them in
        place), their fields shared (all immutable). A deep copy cost the run a sixteenth of its CPU
        per message in a flood of refused messages."""
        return self.model_copy(update={"recent": [e.model_copy() for e in self.recent], "dropped": dict(self.dropped)})

    def news_since(self, earlier: SecurityLog, at: float) -> list[SecurityNote]:
        """Every event recorded after `earlier` (this same log, as it was then), with counts.

        Exact however much collapsed or was evicted in between: the counts of the notes add up
        to `self.total - earlier.total`. Entries kept then and now contribute what they grew
        by; new entries all they hold; events in entries evicted since are found from
        `dropped` and come as one note per source with their texts lost (dated `at`).
        A grown entry's note runs from the entry's last time then (a bound on the new
        events' first time, which is not kept) to its last time now.
        """
        before = {e.seq: e for e in earlier.recent}
        notes: list[SecurityNote] = []
        for e in self.recent:
            old = before.pop(e.seq, None)
            grown = e.count - (old.count if old is not None else 0)
            if grown <= 0:
                continue
            first = e.first_at if old is None else (e.last_at if grown == 1 else old.last_at)
            notes.append(SecurityNote(source=e.source, what=e.what, count=grown, first_at=first, last_at=e.last_at))
        # What was kept then and is gone now was told already up to its count then.
        told: Counter[str] = Counter()
        for old in before.values():
            told[self.bucket(old.source)] += old.count
        for bucket, n in self.dropped.items():
            lost = n - earlier.dropped.get(bucket, 0) - told[bucket]
            if lost > 0:
                notes.append(
                    SecurityNote(source=bucket, what=LOST_BEFORE_FORWARDING, count=lost, first_at=at, last_at=at)
                )
        return notes
