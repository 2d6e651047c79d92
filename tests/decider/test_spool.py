"""The spool of model calls: what a crash between the API's answer and the journal leaves behind."""

from __future__ import annotations

from pathlib import Path

from replenisher.domain.costs import TokenUsage
from replenisher.domain.decisions import Decision, LostCall
from replenisher.durable.spool import CallSpool

USAGE = TokenUsage(input_tokens=900, output_tokens=40, cache_read_input_tokens=1200)


def answered(usd: float = 0.003) -> Decision:
    return Decision(tool="get_quotes", decider="claude", model="claude-sonnet-4-6", usage=USAGE, usd=usd)


def test_an_answered_call_is_charged_and_one_cut_off_in_flight_is_unpriced(tmp_path: Path) -> None:
    spool = CallSpool(tmp_path)
    spool.started("inv-1", "decide 3", "a")
    spool.answered("inv-1", "decide 3", "a", answered())
    spool.started("inv-1", "decide 3", "b")  # the process died in this call
    assert spool.lost("inv-1", "decide 3") == [LostCall(usage=USAGE, usd=0.003), LostCall()]


def test_an_error_the_api_answered_with_is_not_billed(tmp_path: Path) -> None:
    spool = CallSpool(tmp_path)
    spool.started("inv-1", "decide 3", "a")
    spool.failed("inv-1", "decide 3", "a")
    assert spool.lost("inv-1", "decide 3") == []


def test_calls_are_kept_per_invocation_and_step_and_dropped_once_journaled(tmp_path: Path) -> None:
    spool = CallSpool(tmp_path)
    spool.started("inv-1", "decide 3", "a")
    assert spool.lost("inv-2", "decide 3") == [] and spool.lost("inv-1", "decide 4") == []
    spool.done("inv-1", "decide 3")
    assert spool.lost("inv-1", "decide 3") == []
    # A line torn by the crash does not hide the call it began.
    spool.started("inv-1", "decide 5", "c")
    with (next(tmp_path.iterdir())).open("a") as f:
        f.write('{"event": "answ')
    assert spool.lost("inv-1", "decide 5") == [LostCall()]
