"""The replay engine runs the workflow's own loop on a recorded run, without running any step.

Recorded here through the in-memory engine wrapped in `Archiving` (the same wrapper the
workflow runs on Restate), so these need no processes; the corpus of runs the real stack
recorded is replayed in test_corpus.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.documents import StockLevel
from replenisher.domain.policy import OfflinePolicy, choose
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.in_memory.engine import MemoryEngine
from replenisher.in_memory.world import DAY, SKU, Clock, Inbox, MemoryWorld, SupplierSpec
from replenisher.loop import RunRequest, replenish
from replenisher.loop.archiving import Archiving, MemorySink
from replenisher.replay.core import replay


async def recorded_run(**specs: SupplierSpec) -> tuple[MemorySink, MemoryWorld]:
    world = MemoryWorld(Clock(), dict(specs))
    stock = StockLevel(sku=SKU, on_hand=5, safety_stock=20, target_stock=100, suppliers=list(specs))
    request = RunRequest(stock=stock, day_seconds=DAY)
    engine = MemoryEngine(f"replenish-{SKU}-1", OfflinePolicy(), world, Inbox(world))
    sink = MemorySink()
    await replenish(Archiving(engine, sink, request, SKU), request)
    assert sink.archive is not None and sink.archive.outcome is not None
    return sink, world


async def test_a_recorded_run_replays_turn_for_turn_and_runs_no_step() -> None:
    sink, world = await recorded_run(acme=SupplierSpec(price=4.0), bolt=SupplierSpec(price=4.5, quiet=True))
    archive = sink.archive
    assert archive is not None
    before = (len(world.quote_requests), len(world.orders), len(world.approval_requests), len(world.closed))
    report = await replay(archive, OfflinePolicy())
    assert report.first_divergence is None and report.stopped == "end of record", report
    assert report.turns == report.agree == len(archive.decisions) > 5
    assert report.replayed_outcome == archive.outcome == "received"
    assert (len(world.quote_requests), len(world.orders), len(world.approval_requests), len(world.closed)) == before


class PartsAt:
    """The offline policy, except at one turn: there it takes `tool` instead."""

    name = "parts-at"

    def __init__(self, turn: int, tool: str) -> None:
        self.turn, self.tool = turn, tool

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision:
        if len(state.history) == self.turn:
            return Decision(tool=self.tool, reason="parts on purpose", decider=self.name)
        return choose(state, [t.name for t in allowed])


async def test_the_first_divergence_names_the_turn_both_choices_and_both_reasons() -> None:
    sink, _ = await recorded_run(acme=SupplierSpec(price=4.0))
    archive = sink.archive
    assert archive is not None
    # The first turn that offered giving up beside what the run did.
    turn, other = next(
        (e.turn, "done")
        for e in archive.decisions
        if e.decision is not None and "done" in (e.allowed or []) and e.decision.tool != "done"
    )
    assert turn is not None
    recorded = archive.decisions[turn].decision
    assert recorded is not None
    report = await replay(archive, PartsAt(turn, other))
    first = report.first_divergence
    assert first is not None and first.turn == turn and report.stopped == "diverged"
    assert (first.recorded.tool, first.recorded.reason) == (recorded.tool, recorded.reason)
    assert (first.replayed.tool, first.replayed.reason) == (other, "parts on purpose")
    assert (report.agree, report.turns) == (turn, turn + 1)

    # Going on: the loop follows the new choice for as long as the record still answers it. Here
    # that choice (done) ends the loop at once, and the record, which went on, answers no further.
    went_on = await replay(archive, PartsAt(turn, other), keep_going=True)
    assert went_on.diverged == 1 and went_on.first_divergence == first and went_on.turns == turn + 1
    assert went_on.stopped == "record no longer applies" and went_on.stop_detail


async def test_the_side_by_side_timeline_marks_the_turn_where_the_replay_parts() -> None:
    from replenisher.replay_command import side_by_side

    sink, _ = await recorded_run(acme=SupplierSpec(price=4.0))
    archive = sink.archive
    assert archive is not None
    report = await replay(archive, PartsAt(2, "done"))
    lines = side_by_side(archive, report)
    rows = lines[1:]
    assert len(rows) == len(archive.decisions)
    marked = [row for row in rows if "<- parts here" in row]
    assert len(marked) == 1 and marked[0].split()[0] == "2"
    assert "request_approval" in marked[0] and "done" in marked[0]
    assert rows[0].split()[2:4] == ["get_quotes", "get_quotes"]
    # Not replayed (the replay stopped where it parted), but drawn at the time the run took it.
    assert rows[-1].split()[1][0] == "d" and rows[-1].split()[2:] == ["done", "-"]


async def test_the_html_timeline_draws_the_run_in_time_beside_its_replay_and_marks_where_they_part() -> None:
    from replenisher.timeline import replayed

    sink, _ = await recorded_run(acme=SupplierSpec(price=4.0))
    archive = sink.archive
    assert archive is not None
    report = await replay(archive, PartsAt(2, "done"))
    view = replayed.build(archive, report)
    assert [r.turn for r in view.rows] == [e.turn for e in archive.decisions]
    starts = [r.start for r in view.rows]
    assert all(s is not None for s in starts) and starts == sorted(starts)  # type: ignore[type-var]
    assert view.rows[-1].end == archive.ended_at
    waits = [r for r in view.rows if r.recorded.tool.startswith("wait_for")]
    assert waits and all(r.kind == "wait" and r.ended_by == "message" for r in waits)
    assert [r.agree for r in view.rows[:3]] == [True, True, False]
    assert all(r.replayed is None for r in view.rows[3:])

    page = replayed.render_html([view])
    assert f"data-parts-at='{view.parts_at}'" in page and view.parts_at == 2
    assert page.count("data-parts-here") == 1 and "the replay parts here (turn 2)" in page
    parted = page.split("<tr data-turn='2' class=parts>", 1)[1].split("</tr>", 1)[0]
    assert "request_approval" in parted and "done (differs)" in parted and "parts on purpose" in parted
    assert page.count("not replayed: the replay stopped before this turn") == len(view.rows) - 3


async def test_the_html_timeline_escapes_what_the_deciders_wrote() -> None:
    from replenisher.timeline import replayed

    sink, _ = await recorded_run(acme=SupplierSpec(price=4.0))
    archive = sink.archive
    assert archive is not None
    hostile = PartsAt(1, "done")

    async def decide(goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()) -> Decision:
        decision = await PartsAt.decide(hostile, goal, state, allowed, refusals)
        return decision.model_copy(update={"reason": "<script>alert(1)</script>"})

    hostile.decide = decide  # type: ignore[method-assign]
    page = replayed.render_html([replayed.build(archive, await replay(archive, hostile))])
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


async def test_a_run_archives_a_chunk_before_each_wait_and_one_at_the_end_not_one_per_turn() -> None:
    sink, _ = await recorded_run(acme=SupplierSpec(price=4.0))
    archive = sink.archive
    assert archive is not None
    waits = sum(1 for e in archive.entries if e.op == "receive")
    assert len(archive.chunks) == waits + 1 < len(archive.decisions)
    for chunk in archive.chunks[1:]:
        # Each chunk after the first begins where the run came back from a wait.
        assert chunk.entries[0].op == "receive", chunk.entries[0]
    assert archive.chunks[-1].outcome == "received"
