"""`Archiving`: any engine of the loop, with what it answers written to the run's archive.

It wraps the engine the run really runs on (Restate's, or the in-memory one) and passes every
call through unchanged, noting each answer the loop got (`replenisher.domain.archive.Entry`).
It hands the notes to a sink in chunks: one before each wait for a message and each delay
(where a run may rest for days, its archive is then up to date) and one when the run ends.
On Restate the sink writes the archive into the run's workflow state at each chunk and hands
it to the run's `RunArchive` object with one one-way send at the end
(`replenisher.durable.archive.RestateArchiveSink`); both are journaled, so a replayed
invocation notes the same answers and writes and sends nothing again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import BaseModel

from replenisher.domain.archive import ArchiveWriter, Chunk, Entry, RunArchive
from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.documents import EventKind
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.loop import names
from replenisher.loop.engine import Effect, Engine, StepFailed
from replenisher.loop.request import CurrentWait, RunRequest

if TYPE_CHECKING:
    from replenisher.domain.outcomes import ReplenishmentResult

T = TypeVar("T", bound=BaseModel)


class ArchiveSink(Protocol):
    def begin(self, header: RunArchive) -> None: ...

    def send(self, chunk: Chunk) -> None: ...


class MemorySink:
    """Keeps the archive in this process (the in-memory engine's runs, tests)."""

    def __init__(self) -> None:
        self.archive: RunArchive | None = None

    def begin(self, header: RunArchive) -> None:
        self.archive = header

    def send(self, chunk: Chunk) -> None:
        assert self.archive is not None
        self.archive.add(chunk)


class Archiving:
    def __init__(self, inner: Engine, sink: ArchiveSink, request: RunRequest, sku: str) -> None:
        self.inner = inner
        self.sink = sink
        self.run_id = inner.run_id
        self.writer = ArchiveWriter()
        sink.begin(
            RunArchive(run_id=inner.run_id, sku=sku, code=inner.code or None, request=request.model_dump(mode="json"))
        )

    @property
    def code(self) -> str:
        return self.inner.code

    def patched(self, name: str) -> bool:
        """Noted when the new branch is taken, so a replay takes it at the same point; the old
        branch leaves the archive as the code before the patch left it."""
        taken = self.inner.patched(name)
        if taken:
            self.writer.add(Entry.patched(name))
        return taken

    async def now(self) -> float:
        at = await self.inner.now()
        self.writer.add(Entry.now(at))
        return at

    async def decide(self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]) -> Decision:
        return await self.inner.decide(name, state, allowed, refusals)

    def decided(self, turn: int, state: State, allowed: Sequence[Tool], decision: Decision) -> None:
        self.inner.decided(turn, state, allowed, decision)
        self.writer.add(Entry.decided(turn, [t.name for t in allowed], decision))

    def _flush(self) -> None:
        if self.writer.pending:
            self.sink.send(self.writer.chunk())

    async def step(self, name: str, effect: Effect[T]) -> T:
        try:
            result = await self.inner.step(name, effect)
        except StepFailed as e:
            self.writer.add(Entry.step(name, failure=str(e)))
            raise
        self.writer.add(Entry.step(name, result))
        return result

    async def sleep(self, name: str, seconds: float) -> None:
        self._flush()
        await self.inner.sleep(name, seconds)

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None:  # noqa: ASYNC109
        if timeout is None or timeout > 0:
            self._flush()  # a wait: the run may rest here for days
        raw = await self.inner.receive(event, seq, timeout)
        self.writer.add(Entry.receive(names.message_promise(event, seq), raw))
        return raw

    async def arrived_by(self, event: EventKind, seq: int, deadline: float) -> bool:
        arrived = await self.inner.arrived_by(event, seq, deadline)
        self.writer.add(Entry.arrived_by(names.message_promise(event, seq), arrived))
        return arrived

    def checkpoint(self, state: State) -> None:
        self.inner.checkpoint(state)

    def show_wait(self, wait: CurrentWait | None) -> None:
        self.inner.show_wait(wait)

    def finish(self, result: ReplenishmentResult) -> None:
        self.sink.send(self.writer.chunk(outcome=result.outcome))
        self.inner.finish(result)
