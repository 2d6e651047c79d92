"""A run's archive: what a replay needs, kept after Restate has dropped the run's journal.

The archive is the run's side of its engine, in order: every clock reading, every final
decision (with the tools the rules allowed, the tool, arguments, reason, who decided, model,
tokens and cost), every step's result or failure, every message the run received (raw, as
sent, with its envelope: sender and arrival) or the timeout that came instead, and every
answer to "did it arrive in time". A replay engine serves exactly these back to the same
loop, so the loop rebuilds the run's state through the tools' own rules and asks a new
decider the same question at every turn, without touching the world.

Compact and bounded: texts are cut, a message is kept up to `MAX_RAW_CHARS`, and an archive
that would outgrow `MAX_ARCHIVE_BYTES` stops taking chunks and says where it was cut.
Approval tokens are replaced by a digest: equal tokens stay equal (a replay judges each
message as the run did), and none can be used. Versioned by `schema_version`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from replenisher.domain.costs import TokenUsage
from replenisher.domain.decisions import Decision

ARCHIVE_SCHEMA_VERSION = 2
MAX_ARCHIVE_BYTES = 96_000
"""Upper bound on one archive as JSON; the real runs of the corpus take a tenth of it."""
MAX_TEXT = 400
MAX_ARGS_CHARS = 2_000
MAX_RAW_CHARS = 24_000
"""A message beyond this (a supplier's email is at most 20,000 characters) is kept cut."""
SECRET_KEYS = frozenset({"token", "approval_token"})

Op = Literal["now", "decided", "step", "receive", "arrived_by", "patched"]


def cut(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def token_digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def redact(value: Any) -> Any:
    """Approval tokens replaced by their digest, wherever they appear."""
    if isinstance(value, dict):
        return {
            k: (token_digest(v) if k in SECRET_KEYS and isinstance(v, str) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def raw_message(raw: bytes) -> str:
    """A message as the run received it, tokens digested; cut (and so unreadable) beyond the bound."""
    text = raw.decode("utf-8", "replace")
    try:
        text = json.dumps(redact(json.loads(text)), separators=(",", ":"))
    except ValueError:
        pass  # not JSON: the run refused it as such, and a replay will too
    return text if len(text) <= MAX_RAW_CHARS else text[:MAX_RAW_CHARS]


class ArchivedDecision(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    decider: str = "offline"
    model: str | None = None
    usage: TokenUsage | None = None
    usd: float = 0.0

    @classmethod
    def of(cls, decision: Decision) -> ArchivedDecision:
        args = decision.args if len(json.dumps(decision.args, default=str)) <= MAX_ARGS_CHARS else {"_cut": True}
        return cls(
            tool=decision.tool[:80],
            args=redact(args),
            reason=cut(decision.reason) or "",
            decider=decision.decider[:40],
            model=cut(decision.model, 80),
            usage=decision.usage,
            usd=decision.usd,
        )


class Entry(BaseModel):
    """One thing the run's engine answered, in the order the loop asked."""

    op: Op
    name: str | None = Field(default=None, description="step name, or message promise key")
    value: Any = Field(default=None, description="now: seconds; step: result; receive: raw message; arrived_by")
    failure: str | None = Field(default=None, description="a step that failed for good: why")
    turn: int | None = None
    allowed: list[str] | None = None
    decision: ArchivedDecision | None = None

    @classmethod
    def now(cls, at: float) -> Entry:
        return cls(op="now", value=at)

    @classmethod
    def decided(cls, turn: int, allowed: list[str], decision: Decision) -> Entry:
        return cls(op="decided", turn=turn, allowed=allowed, decision=ArchivedDecision.of(decision))

    @classmethod
    def step(cls, name: str, result: BaseModel | None = None, failure: str | None = None) -> Entry:
        value = None if result is None else redact(result.model_dump(mode="json"))
        return cls(op="step", name=name, value=value, failure=cut(failure))

    @classmethod
    def receive(cls, key: str, raw: bytes | None) -> Entry:
        return cls(op="receive", name=key, value=None if raw is None else raw_message(raw))

    @classmethod
    def arrived_by(cls, key: str, arrived: bool) -> Entry:
        return cls(op="arrived_by", name=key, value=arrived)

    @classmethod
    def patched(cls, name: str) -> Entry:
        """The run took the new branch of patch `name` here (`replenisher.loop.patches`)."""
        return cls(op="patched", name=name, value=True)


class Chunk(BaseModel):
    """What the run sends its archive at once: the entries since the last chunk, numbered."""

    seq: int = Field(ge=0)
    entries: list[Entry] = Field(default_factory=list)
    outcome: str | None = Field(default=None, description="set on the last chunk")


class RunArchive(BaseModel):
    schema_version: int = ARCHIVE_SCHEMA_VERSION
    run_id: str
    sku: str = ""
    code: str | None = None
    request: dict[str, Any] = Field(default_factory=dict, description="the run's request: stock, waits, memory, terms")
    chunks: list[Chunk] = Field(default_factory=list)
    outcome: str | None = Field(default=None, description="the run's outcome; None while it runs")
    cut_at_chunk: int | None = Field(default=None, description="chunks from here on did not fit the size bound")

    def size(self) -> int:
        return len(self.model_dump_json())

    @property
    def entries(self) -> list[Entry]:
        return [entry for chunk in self.chunks for entry in chunk.entries]

    @property
    def started_at(self) -> float | None:
        return next((float(e.value) for e in self.entries if e.op == "now"), None)

    @property
    def ended_at(self) -> float | None:
        if self.outcome is None:
            return None
        return next((float(e.value) for e in reversed(self.entries) if e.op == "now"), None)

    @property
    def decisions(self) -> list[Entry]:
        return [e for e in self.entries if e.op == "decided"]

    def with_header(self, header: RunArchive) -> RunArchive:
        """This archive under the run's header, the chunks it already holds kept in their place."""
        fresh = header.model_copy(update={"run_id": self.run_id, "chunks": [], "cut_at_chunk": None, "outcome": None})
        for chunk in self.chunks:
            fresh.add(chunk)
        return fresh

    def within_bound(self) -> RunArchive:
        """This archive as `add` keeps one: itself if it fits, else its chunks again under its
        header, cut where they stop fitting (its outcome kept all the same)."""
        if self.size() <= MAX_ARCHIVE_BYTES:
            return self
        kept = self.with_header(self)
        kept.outcome = self.outcome
        return kept

    def add(self, chunk: Chunk) -> str:
        """Keep the chunk if the archive stays within its bound; otherwise mark where it was cut.
        Returns the archive's JSON as kept: the bound is judged on it, so whoever stores the
        archive next need not dump it again (a run stores it at every wait, and again at every
        replay of those waits)."""
        if any(c.seq == chunk.seq for c in self.chunks):
            return self.model_dump_json()  # delivered twice
        if chunk.outcome is not None:
            self.outcome = cut(chunk.outcome, 80)
        if self.cut_at_chunk is not None and chunk.seq >= self.cut_at_chunk:
            return self.model_dump_json()
        self.chunks.append(chunk)
        self.chunks.sort(key=lambda c: c.seq)
        dumped = self.model_dump_json()
        if len(dumped) > MAX_ARCHIVE_BYTES:
            self.cut_at_chunk = chunk.seq
            self.chunks = [c for c in self.chunks if c.seq < chunk.seq]
            dumped = self.model_dump_json()
        return dumped


class ArchiveWriter:
    """Collects a run's entries and hands them on in chunks: one before each wait, one at the end."""

    def __init__(self) -> None:
        self.pending: list[Entry] = []
        self.sent = 0

    def add(self, entry: Entry) -> None:
        self.pending.append(entry)

    def chunk(self, outcome: str | None = None) -> Chunk:
        chunk = Chunk(seq=self.sent, entries=self.pending, outcome=outcome)
        self.pending = []
        self.sent += 1
        return chunk
