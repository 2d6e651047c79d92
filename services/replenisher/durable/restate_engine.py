"""`RestateEngine`: the loop's engine on a Restate workflow context.

Every primitive is one Restate journal entry (or the same few, in the same order, that the
workflow always wrote), named by `replenisher.loop.names`: decisions and steps are
`ctx.run` with the standard bounded retry, delays and deadlines are durable timers,
messages are durable promises resolved by `Replenish.deliver`, and the state and the
current wait are workflow state the views read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import TypeVar

import restate
from pydantic import BaseModel
from restate import RestateDurableFuture, WorkflowContext
from restate.exceptions import TerminalError
from restate.serde import BytesSerde

from replenisher.domain.audit import day_of
from replenisher.domain.decisions import GOAL, Decider, DeciderTerms, Decision, Refusal
from replenisher.domain.documents import EventKind
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.ports import Rejected, World
from replenisher.domain.run_audit import ApprovalTold, approval_news
from replenisher.domain.security import SecurityNotes
from replenisher.domain.security_log import SecurityLog, SecurityNote
from replenisher.domain.sku import parse_run_id
from replenisher.domain.sku_list import WaitEntry, shard_key_of
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.domain.turns import DeciderUnavailable
from replenisher.durable.clock import Timed, journaled_time
from replenisher.durable.contracts import (
    ARRIVAL_OF,
    AUDIT_APPEND,
    FINISH,
    LIST_PUT_WAIT,
    NOTE_SECURITY,
    RoutedQuery,
)
from replenisher.durable.probes import crash_point, record_decision
from replenisher.durable.spool import CallSpool
from replenisher.durable.steps import retry_options, timed_step
from replenisher.loop import names
from replenisher.loop.engine import Effect, RunStopped, StepFailed
from replenisher.loop.patches import LIST_WAIT_ENDS, LIST_WAITS, Stamp, here
from replenisher.loop.request import CurrentWait
from replenisher.wiring import wiring

T = TypeVar("T", bound=BaseModel)
_TimedDecision = Timed[Decision]


@contextmanager
def _stops() -> Iterator[None]:
    try:
        yield
    except TerminalError as e:
        raise RunStopped(e.message) from e


class RestateEngine:
    def __init__(
        self,
        ctx: WorkflowContext,
        sku: str,
        decider: Decider | None = None,
        world: World | None = None,
        terms: DeciderTerms | None = None,
        clock: float | None = None,
        start: Stamp | None = None,
    ) -> None:
        self.ctx = ctx
        self.run_id = ctx.key()
        self.sku = sku
        # This deployment's code: the stamp it journals with every decision and step it takes. What a
        # turn is labelled with and what `patched` answers come from the journal instead (the stamp
        # of the last answer, or the run's request's before the first), so that a run moved to
        # another deployment replays as it first ran: `replenisher.loop.patches`. A request from
        # before stamps names no code: this deployment's, which the code of that time stamped.
        self.deployment_code = wiring().settings.code_version
        self._here = here(self.deployment_code)
        self._stamp = start or Stamp(code=self.deployment_code)
        # The run's own decider, fixed when it started, whatever this service is set to now.
        self.terms = terms
        if decider is None:
            decider = wiring().decider_for(terms) if terms is not None else wiring().decider
        self.decider = decider
        self._world = world
        # The security log as the SKU last heard of it: rebuilt on replay, as the state is, by
        # the same checkpoints, so the sends come out the same.
        self._security_told = SecurityLog()
        self._audit_told = ApprovalTold()
        # What the views hold now, so an unchanged state or wait is not written (and journaled) again.
        self._written: bytes | None = None
        self._shown: CurrentWait | None = None
        # What the SKU list last heard of the run's wait (which wait, how many times told) and the
        # price it asks: rebuilt on replay by the same calls, so the sends come out the same.
        self._listed: tuple[str, str, int, float] | None = None
        self._list_told = 0
        self._list_since: float | None = None
        self._asked: tuple[float | None, str | None] = (None, None)
        # A wait ended that the list still shows: told before a delay or after a failed step, else
        # replaced or hidden (`show_wait`).
        self._end_untold = False
        self._pending: dict[str, RestateDurableFuture[bytes]] = {}
        # The last clock reading, while nothing durable has happened since (see `now`); at the
        # start, the one the run was started with (journaled by the SKU, in the run's input).
        self._time: float | None = clock

    @property
    def code(self) -> str:
        """The code version that gave the run's last journaled answer (or started it)."""
        return self._stamp.code

    def patched(self, name: str) -> bool:
        """Whether that code knew the patch `name`: read from the journal, no entry of its own."""
        return self._stamp.knows(name)

    @property
    def world(self) -> World:
        if self._world is not None:
            return self._world
        return wiring().world_for(self.terms) if self.terms is not None else wiring().world

    async def now(self) -> float:
        """The run's clock. Asked again before anything durable happened (only the loop's own
        pure work in between) it answers the same reading: a journal entry fewer each time, and
        just as deterministic, since a replay takes the same path through the same entries.
        A decision or a step journals the clock as it ended with its result, and the run's first
        reading comes with its request, so only a wait, a delay or a call to the SKU leaves the
        next reading to a `timestamp` entry."""
        if self._time is None:
            with _stops():
                self._time = await journaled_time(self.ctx)
        return self._time

    async def decide(self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]) -> Decision:
        """One ask as a journaled step, retried with backoff; a replay returns the journaled answer.

        A model call is written down on the spool before and after it (see `spool`), so an
        answer a crash kept out of the journal is charged when the step runs again.
        """
        scope, turn, decider = self.run_id, names.decision_turn(name), self.decider
        invocation = self.ctx.request().id
        spool = CallSpool(wiring().settings.model_spool_dir) if decider.name != "offline" else None
        clock = wiring().clock

        async def take_decision() -> Timed[Decision]:
            crash_point(scope, name, "before")
            record_decision(scope, turn)
            lost = spool.lost(invocation, name) if spool else []
            call = uuid.uuid4().hex
            if spool:
                spool.started(invocation, name, call)
            try:
                decision = await decider.decide(GOAL, state, allowed, refusals)
            except Exception as e:
                # An error the API answered with is not billed; a broken connection may have been.
                if spool and getattr(e.__cause__, "status_code", None) is not None:
                    spool.failed(invocation, name, call)
                if isinstance(e, Rejected):
                    raise TerminalError(e.reason, status_code=e.status) from e
                raise
            if spool:
                spool.answered(invocation, name, call, decision)
            crash_point(scope, name, "after")
            if lost:
                decision = decision.model_copy(update={"lost": lost})
            return _TimedDecision(value=decision, at=clock()).stamped(self._here)

        self._time = None
        try:
            timed = await self.ctx.run_typed(name, take_decision, retry_options(_TimedDecision))
        except TerminalError as e:
            if spool:
                spool.done(invocation, name)
            self._tell_untold_end()  # its retries spent: the run goes on, perhaps to a slow fallback
            raise DeciderUnavailable(e.message) from e
        # Journaled now (or replayed from the journal): the spool has nothing more to tell.
        if spool:
            spool.done(invocation, name)
        # The clock as the answer came, journaled with it: the run's next reading; and the code that gave it.
        self._time = timed.at
        self._stamp = timed.stamp(self.deployment_code)
        return timed.value

    def decided(self, turn: int, state: State, allowed: Sequence[Tool], decision: Decision) -> None:
        pass  # the journal holds every ask; the rules' pick follows from it on replay

    async def step(self, name: str, effect: Effect[T]) -> T:
        self._time = None
        try:
            timed = await timed_step(self.ctx, name, effect.result, effect.run, self.world, stamp=self._here)
        except TerminalError as e:
            # Its retries spent (up to about a minute): an ended wait the list still shows goes now.
            self._tell_untold_end()
            raise StepFailed(e.message) from e
        # The clock as the step ended, journaled with its result: the run's next reading; and the code that ran it.
        self._time = timed.at
        self._stamp = timed.stamp(self.deployment_code)
        return timed.value

    async def sleep(self, name: str, seconds: float) -> None:
        self._time = None
        self._tell_untold_end()
        with _stops():
            await self.ctx.sleep(timedelta(seconds=seconds), name=name)

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None:  # noqa: ASYNC109
        # Read as bytes, parsed by the loop: no value anyone resolved the promise with can
        # fail the run in the SDK's serde.
        self._time = None
        key = names.message_promise(event, seq)
        promise = self.ctx.promise(key, serde=BytesSerde())
        with _stops():
            if timeout is None:
                return await promise.value()
            if timeout <= 0:
                return await promise.peek()
            # One read of the promise per wait, raced again against each new timer.
            message = self._pending.get(key) or promise.value()
            self._pending[key] = message
            match await restate.select(message=message, timeout=self.ctx.sleep(timedelta(seconds=timeout))):
                case ["message", value]:
                    return value  # type: ignore[no-any-return]
            return None

    async def arrived_by(self, event: EventKind, seq: int, deadline: float) -> bool:
        """Whether the message reached the SKU's address by the deadline, though it is not here yet.

        While the service was down, Restate held the deliver and this run's timer alike; when it
        came back the timer may have won. The call is to an exclusive handler of the SKU, so it
        runs after every deliver Restate accepted for the SKU before it: what it reports routed is
        all that arrived, with when it arrived (the inbound endpoint's stamp, else the SKU's clock).
        """
        self._time = None
        with _stops():
            arrival = await ARRIVAL_OF.call(self.ctx, self.sku, RoutedQuery(run_id=self.run_id, event=event, seq=seq))
        return arrival.arrived_at is not None and arrival.arrived_at <= deadline

    def checkpoint(self, state: State) -> None:
        """The state for the views, and what the run's security log recorded since the last
        checkpoint (counts included, however much it collapsed or dropped) to the SKU's record now."""
        with _stops():
            # The SDK's own encoding of a model (`model_dump_json`), compared before it is written.
            written = state.model_dump_json().encode("utf-8")
            self._asked = state.asked
            if written != self._written:
                self.ctx.set(names.STATE, written, serde=BytesSerde())
                self._written = written
            news: list[SecurityNote] = []
            if state.security.total != self._security_told.total:
                news = state.security.news_since(self._security_told, state.now)
                NOTE_SECURITY.send(self.ctx, state.sku, SecurityNotes(run_id=state.run_id, events=news))
                self._security_told = state.security.reading()
            # The decisions on the run's approval, and the ones it refused, into the day's audit log.
            records, self._audit_told = approval_news(self._audit_told, state, news)
            for record in records:
                AUDIT_APPEND.send(self.ctx, day_of(record.at), record)

    def show_wait(self, wait: CurrentWait | None) -> None:
        if wait == self._shown:
            return  # e.g. the same wait again after a reminder: it began when it was first shown
        self._shown = wait
        with _stops():
            if wait is None:
                self.ctx.clear(names.WAITING)
            else:
                self.ctx.set(names.WAITING, wait)
            if not self.patched(LIST_WAITS):
                return
            if wait is None and self.patched(LIST_WAIT_ENDS):
                # Not sent now: the run's next wait replaces it on the list, its end hides it (the
                # agent's put then names no active run), and a delay or a decision or step that
                # failed after its retries sends it first. Until then the list shows the wait through
                # the steps in between: a decision and a call, each at most its retries long.
                self._end_untold = True
                return
            self._end_untold = False
            self._tell_list(wait)

    def _tell_untold_end(self) -> None:
        if self._end_untold:
            self._end_untold = False
            with _stops():  # a send refused (the call cancelled) stops the run, as any refused entry does
                self._tell_list(None)

    def _tell_list(self, wait: CurrentWait | None) -> None:
        """The run's wait on its SKU's entry of the list, when it is another wait than the list heard of,
        or the same with a new deadline (an escalation's; a reminder keeps it): then since as it began."""
        which = (wait.tool, wait.event, wait.seq, wait.deadline) if wait is not None else None
        parsed = parse_run_id(self.run_id)
        if which == self._listed or parsed is None:
            return
        same_wait = which is not None and self._listed is not None and which[:3] == self._listed[:3]
        self._listed = which
        self._list_told += 1
        if wait is None:
            told = WaitEntry(sku=self.sku, run=parsed[1], seq=self._list_told)
        else:
            # The run's clock when it has read it since anything durable happened; else the list's.
            self._list_since = self._list_since if same_wait else self._time
            price, supplier = self._asked
            told = WaitEntry(
                sku=self.sku,
                run=parsed[1],
                seq=self._list_told,
                tool=wait.tool,
                since=self._list_since,
                price=price,
                until=wait.deadline,
                supplier=supplier,
            )
        LIST_PUT_WAIT.send(self.ctx, shard_key_of(self.sku), told)

    def finish(self, result: ReplenishmentResult) -> None:
        with _stops():
            FINISH.send(self.ctx, result.sku, result)
