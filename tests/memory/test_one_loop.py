"""The suites' in-memory runs go through the workflow's own loop (`replenisher.loop`), not a copy of it.

What used to drift between the copies is shown here on the in-memory engine: the durable
delay before a re-check is taken (and moves the clock), steps carry the names Restate
journals, and every tool taken was allowed when it was taken.
"""

from __future__ import annotations

import time

from replenisher.domain.documents import PurchaseOrder
from replenisher.domain.policy import OfflinePolicy
from replenisher.in_memory.engine import STEP_ATTEMPTS, run_in_memory
from replenisher.in_memory.world import DAY, Clock, Inbox, MemoryWorld, SupplierSpec
from replenisher.loop import names
from simulated_world.calls import CallFilter


def lost_answers() -> MemoryWorld:
    """The supplier takes the order but its answer is lost, and it is down until every retry of the
    order and of the first look-up is spent (the world's faults, as the e2e suites set them)."""
    world = MemoryWorld(Clock(), {"acme": SupplierSpec(price=4.0)})
    down = (STEP_ATTEMPTS - 1) + STEP_ATTEMPTS  # the order's retries, then the whole first look-up
    world.set_faults("acme", lose_reply_calls=1, down_after_order_calls=down)
    return world


async def test_a_recheck_waits_its_durable_delay_and_the_run_still_ends_with_one_order() -> None:
    world = lost_answers()
    run = await run_in_memory(OfflinePolicy(), world, Inbox(world), suppliers=["acme"])

    assert run.result.outcome == "received"
    assert [o.submissions for o in world.orders] == [1], "the order the lost answer hid was found, not placed twice"
    # One submission, its answer lost; the whole first look-up found the supplier down, the second found the order.
    assert [c.status for c in world.core.calls.find(CallFilter(op="place_order"))] == [503]
    lookups = [c.status for c in world.core.calls.find(CallFilter(op="find_order"))]
    assert lookups[-(STEP_ATTEMPTS + 1) :] == [503] * STEP_ATTEMPTS + [200], lookups
    checks = [r.turn for r in run.state.history if r.tool == "check_order_status"]
    assert len(checks) >= 2
    # The second check waits a durable delay first, named as the workflow journals it.
    (delay_name, seconds), *_ = run.engine.delays
    assert delay_name == names.delay("check_order_status", checks[1])
    assert seconds >= DAY * run.state.waits.status_recheck
    assert names.step("check_order_status", checks[1]) in run.engine.steps
    assert all(allowed for _, allowed in run.executed)


async def test_the_loop_archives_every_turn_and_the_offline_policy_agrees_with_it_on_replay() -> None:
    from replenisher.replay.core import replay

    world = lost_answers()
    run = await run_in_memory(OfflinePolicy(), world, Inbox(world), suppliers=["acme"])
    archive = run.engine.archive
    assert archive is not None and archive.outcome == "received"
    assert [e.decision.tool for e in archive.decisions if e.decision] == [r.tool for r in run.state.history]
    report = await replay(archive, OfflinePolicy())
    assert report.turns == len(archive.decisions) and report.agree == report.turns, report
    assert report.stopped == "end of record" and report.replayed_outcome == "received"


class WatchedClock(MemoryWorld):
    """Notes, as each order is placed, what `time.time()` and the world's clock read."""

    readings: list[tuple[float, float]]

    async def place_order(self, po: PurchaseOrder):  # type: ignore[no-untyped-def]
        self.readings.append((time.time(), self.clock()))
        return await super().place_order(po)


async def test_the_tools_read_the_worlds_clock_and_the_process_clock_is_left_alone() -> None:
    world = WatchedClock(Clock(), {"acme": SupplierSpec(price=4.0)})
    world.readings = []
    before = time.time()
    run = await run_in_memory(OfflinePolicy(), world, Inbox(world), suppliers=["acme"])

    assert run.result.outcome == "received"
    (process, simulated), *_ = world.readings
    assert process >= before, "time.time() is the real clock while a step runs: nothing patched it"
    assert abs(simulated - before) > DAY, "the simulated clock is another time altogether"
    # The tools stamped their results from the world's clock: the order's time is the simulated one.
    assert run.state.ordered_at == simulated
