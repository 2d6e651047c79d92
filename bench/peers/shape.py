"""What every system runs: the scenario's settings and the synthetic wake-up run.

The wake-up run ("BenchRun") is the shape of a replenishment waiting for approval, with the
number of journaled steps before the wait as a knob: K steps, each one the offline decider's
pick (the `decide` step of the real loop), then a wait for the approval message, then one step
that stamps the wall-clock time it ran at. The driver resolves the approval at t0 and reads the
stamp t1 from the run's result: t1 - t0 is the time from "approval sent" to "next step running".
Every engine journals the K steps its own way (a `ctx.run`, an activity, a DBOS step).
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from replenisher.domain.documents import StockLevel
from replenisher.domain.policy import choose
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS
from replenisher.domain.waits import WaitDays

# A compressed business day: long enough that no deadline passes while a loaded 2-core machine
# works through a queue (the slowest system takes minutes to fill the idle test), while nothing
# in the scenario waits on the clock (the world answers at once: auto-approval after 0 days,
# replies and goods with 0 lead time). Quotes are valid for a year of these days.
DAY_SECONDS = 60.0
QUOTE_VALID_DAYS = 365
WAITS = WaitDays(approval=1000, supplier_reply=1000)
TASK_QUEUE = "replenisher-bench"


@cache
def _sample_state() -> State:
    stock = StockLevel(sku="SKU-BENCH", on_hand=5, safety_stock=20, target_stock=100, suppliers=["bench-supplier"])
    return State.start("replenish-SKU-BENCH-1", stock, DAY_SECONDS, 0.0, WAITS)


def decide_turn(turn: int) -> dict[str, Any]:
    """One pre-wait step: the offline policy's pick over a fresh run's allowed tools."""
    state = _sample_state()
    decision = choose(state, [t.name for t in TOOLS if t.allowed(state)])
    return {"turn": turn, **decision.model_dump(mode="json")}


def woke_at() -> float:
    """The step after the wait: when it ran, by the wall clock the driver shares."""
    return time.time()
