"""The timeline model from Restate's rows, without starting anything.

The rows are shaped as restate-server 1.7.12 answers `SELECT ... FROM sys_journal` and
`sys_journal_events` (entry_lite_json, RFC 3339 timestamps); the end-to-end tests read the
real thing.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from replenisher.domain.documents import StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.state import State, TurnRecord
from replenisher.loop import names
from replenisher.operations.restate.read_models import decision_of
from replenisher.timeline.build import JOURNAL_GONE, STATE_GONE, build_timeline
from replenisher.timeline.html import render_html
from replenisher.timeline.journal import invocation, journal_entries, transient_failures
from replenisher.timeline.model import Timeline
from replenisher.timeline.text import render_text

T0 = 1_800_000_000.0
RUN = "replenish-SKU-9-1"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Journal:
    """Builds sys_journal and sys_journal_events rows the way the workflow writes them."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.completion = 0

    def _row(self, entry_type: str, at: float, lite: dict[str, Any], name: str = "") -> None:
        self.rows.append(
            {
                "index": len(self.rows),
                "entry_type": entry_type,
                "name": name,
                "appended_at": iso(at),
                "entry_lite_json": json.dumps(lite),
            }
        )

    def command(self, kind: str, at: float, entry_name: str = "", **body: Any) -> int:
        self.completion += 1
        self._row(f"Command: {kind}", at, {"Command": {kind: {"completion_id": self.completion, **body}}}, entry_name)
        return self.completion

    def run(self, name: str, at: float) -> int:
        return self.command("Run", at, name, name=name)

    def notify(self, completion: int, at: float, kind: str = "Run", result: str = "Success") -> None:
        lite = {"Notification": {"ty": {"Completion": kind}, "id": {"CompletionId": completion}, "result": result}}
        self._row(f"Notification: {kind}", at, lite)

    def step(self, name: str, at: float, took: float, result: str = "Success") -> None:
        self.notify(self.run(name, at), at + took, result=result)

    def wait(self, key: str, at: float, deadline: float) -> tuple[int, int]:
        promise = self.command("GetPromise", at, key=key)
        timer = self.command("Sleep", at, wake_up_time=int(deadline * 1000))
        return promise, timer

    def failed_attempt(self, at: float, message: str, code: str = "RT0007", command: str | None = None) -> None:
        event = {"ty": "TransientError", "error_code": 500, "error_message": message, "restate_doc_error_code": code}
        if command:
            event["related_command_name"] = command
        self.events.append(
            {
                "after_journal_entry_index": len(self.rows) - 1,
                "appended_at": iso(at),
                "event_type": "TransientError",
                "event_json": json.dumps(event),
            }
        )


def state_with(*turns: tuple[str, str, str]) -> State:
    stock = StockLevel(sku="SKU-9", on_hand=5, safety_stock=20, target_stock=100, suppliers=["acme"])
    state = State.start(RUN, stock, day_seconds=10.0, started_at=T0)
    state.history = [TurnRecord(turn=i, tool=t, reason=r, summary=s) for i, (t, r, s) in enumerate(turns)]
    return state


def timeline(journal: Journal, state: State | None, **kw: Any) -> Timeline:
    return build_timeline(
        RUN,
        "SKU-9",
        now=kw.pop("now", T0 + 1000),
        entries=journal_entries(journal.rows),
        failures=transient_failures(journal.events),
        state=state,
        **kw,
    )


def quoted_then_approved() -> Journal:
    j = Journal()
    j.command("Input", T0)
    j.step(names.decide(0), T0 + 0.01, 0.001)
    quotes = j.run("get_quotes 0", T0 + 0.02)
    j.failed_attempt(
        T0 + 0.03,
        "HTTPStatusError(\"Server error '503 '\")\nFor more information check: https://x",
        command="get_quotes 0",
    )
    j.notify(quotes, T0 + 0.8)
    j.step(names.decide(1), T0 + 0.9, 0.001)
    promise, timer = j.wait("approval-0", T0 + 1.0, deadline=T0 + 31.0)
    j.notify(promise, T0 + 12.0, kind="GetPromise")
    j.step(names.decide(2), T0 + 12.1, 0.001)
    j.step("place_order 2", T0 + 12.2, 0.01)
    j.notify(timer, T0 + 31.0, kind="Sleep")  # the timer that lost the race still fires later
    return j


def test_turns_take_their_times_from_the_journal_and_their_words_from_the_history() -> None:
    state = state_with(
        ("get_quotes", "need prices", "1 quote, cheapest 4.00"),
        ("wait_for_approval", "the manager has not decided yet", "approved up to 4.00"),
        ("place_order", "the price is approved", "ordered PO-1"),
    )
    t = timeline(quoted_then_approved(), state)

    assert t.source == "journal" and t.notes == []
    assert [turn.tool for turn in t.turns] == ["get_quotes", "wait_for_approval", "place_order"]
    quotes = t.turns[0].action
    assert quotes is not None and quotes.kind == "step"
    assert (quotes.start, quotes.end) == (T0 + 0.02, T0 + 0.8)
    assert quotes.errors == ["HTTPStatusError(\"Server error '503 '\")"], "retries are drawn on their step, first line"
    assert not quotes.failed
    wait = t.turns[1].action
    assert wait is not None and wait.kind == "wait" and wait.promise == "approval-0"
    assert (wait.start, wait.end, wait.deadline, wait.ended_by) == (T0 + 1.0, T0 + 12.0, T0 + 31.0, "message")
    assert t.turns[1].reason == "the manager has not decided yet" and t.turns[1].summary == "approved up to 4.00"
    assert t.bands == [], "a step's own retries are not an outage"
    assert t.day_of(T0 + 12.0) == 1.2


def test_a_wait_ended_by_its_timer_and_a_step_that_gave_up() -> None:
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    j.step("get_quotes 0", T0 + 0.1, 0.7, result="Failure")
    j.step(names.decide(1), T0 + 1, 0.001)
    _, timer = j.wait("supplier-reply-0", T0 + 1.1, deadline=T0 + 71.1)
    j.notify(timer, T0 + 71.1, kind="Sleep")
    t = timeline(j, None)

    assert t.turns[0].action is not None and t.turns[0].action.failed
    wait = t.turns[1].action
    assert wait is not None and wait.name == "wait_for_supplier_reply" and wait.ended_by == "timeout"
    assert t.turns[1].tool == "wait_for_supplier_reply", "the tool comes from the promise when the history is gone"
    assert t.notes == ["the run's state could not be read: turns are shown without reasons or summaries"]


def test_an_outage_band_runs_from_the_first_failed_attempt_until_the_service_was_seen_again() -> None:
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    promise, _ = j.wait("approval-0", T0 + 0.1, deadline=T0 + 100)
    j.failed_attempt(
        T0 + 5, "unexpected error while reading the response body: stream closed because of a broken pipe", "RT0010"
    )
    j.failed_attempt(
        T0 + 6, "error when calling 'http://127.0.0.1:9080/': h2 pool connection error: Connection refused", "RT0010"
    )
    j.notify(promise, T0 + 20, kind="GetPromise")
    j.step(names.decide(1), T0 + 20.1, 0.001)
    # Another invocation journaled a command at T0+9: the service was back by then.
    t = timeline(j, None, answered={T0 + 5: T0 + 9})

    assert len(t.bands) == 1
    band = t.bands[0]
    assert (band.start, band.end) == (T0 + 5, T0 + 9)
    assert len(band.errors) == 2 and "Connection refused" in band.errors[1]
    without = timeline(j, None)
    assert (without.bands[0].start, without.bands[0].end) == (T0 + 5, T0 + 20.1), "else the run's next command"


def test_an_outage_still_going_is_open_and_counts_the_attempts() -> None:
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    j.run("place_order 0", T0 + 1)
    j.failed_attempt(T0 + 1.5, "error when calling 'http://127.0.0.1:9080/': Connection refused", "RT0010")
    inv = invocation(
        {
            "id": "inv_1",
            "status": "backing-off",
            "retry_count": 7,
            "last_failure": "[500] error when calling 'http://127.0.0.1:9080/': Connection refused",
            "created_at": iso(T0),
        }
    )
    t = timeline(j, None, invocation=inv, now=T0 + 60)

    assert len(t.bands) == 1 and t.bands[0].end is None and t.bands[0].retries == 7
    assert t.status.startswith("service down since 2027-01-15 08:00:01 UTC"), t.status
    text = render_text(t, width=120)
    assert "service down now" in text and "7 attempts refused" in text
    assert t.turns[0].action is not None and t.turns[0].action.end is None, "the step never finished"


def test_without_the_journal_the_runs_own_history_is_shown_and_the_gap_is_said() -> None:
    state = state_with(("get_quotes", "need prices", "1 quote, cheapest 4.00"), ("done", "nothing left open", ""))
    t = build_timeline(RUN, "SKU-9", now=T0 + 10, state=state)

    assert t.source == "history" and t.notes == [JOURNAL_GONE]
    assert [(turn.tool, turn.spans) for turn in t.turns] == [("get_quotes", []), ("done", [])]
    text = render_text(t)
    assert "no longer holds this run's journal" in text and "1 quote, cheapest 4.00" in text


def test_with_only_the_outcome_left_the_timeline_says_so() -> None:
    outcome = ReplenishmentResult(
        run_id=RUN, sku="SKU-9", outcome="received", detail="95 received", turns=10, started_at=T0, ended_at=T0 + 90
    )
    t = build_timeline(RUN, "SKU-9", now=T0 + 1e6, outcome=outcome)

    assert t.source == "outcome" and JOURNAL_GONE in t.notes and STATE_GONE in t.notes
    assert (t.started_at, t.ended_at) == (T0, T0 + 90)
    text = render_text(t)
    assert "outcome: RECEIVED" in text and "only the outcome" in text and "10 turns" in text


def test_the_text_timeline_fits_its_width_and_marks_how_waits_ended() -> None:
    j = quoted_then_approved()
    j.failed_attempt(T0 + 13, "stream closed because of a broken pipe", "RT0010")
    j.step(names.decide(3), T0 + 20, 0.001)
    t = timeline(j, state_with(("get_quotes", "need prices", "ok"), ("wait_for_approval", "", "approved")))
    text = render_text(t, width=100)

    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert "◆" in text and "░" in text and "service down" in text
    assert "get_quotes retried after: HTTPStatusError" in text


def test_the_html_timeline_is_self_contained_and_escapes_what_suppliers_wrote() -> None:
    hostile = "<script>alert('x')</script> & <img src=x onerror=alert(1)>"
    state = state_with(("get_quotes", hostile, hostile), ("wait_for_approval", "", "approved"))
    page = render_html(timeline(quoted_then_approved(), state))

    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert "<svg" in page and "data-ended-by='message'" in page
    fetches = re.findall(r"<[a-z]+[^>]*\s(?:src|href)=", page) + re.findall(r"url\(http", page)
    assert fetches == [], "nothing is fetched from elsewhere"


def test_a_message_that_could_not_be_delivered_while_the_service_was_down_draws_the_outage() -> None:
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    promise, _ = j.wait("approval-0", T0 + 0.1, deadline=T0 + 100)
    j.notify(promise, T0 + 30, kind="GetPromise")
    j.step(names.decide(1), T0 + 30.1, 0.001)
    deliver = Journal()  # the SkuAgent's deliver invocation, retried while the service was down
    deliver.command("Input", T0 + 10)
    deliver.failed_attempt(T0 + 10.01, "error when calling 'http://127.0.0.1:9080/': Connection refused", "RT0010")
    deliver.failed_attempt(T0 + 11, "HTTPStatusError: 503 from the ERP", "RT0007", command=names.READ_STOCK)
    t = timeline(j, None, related_failures=transient_failures(deliver.events), answered={T0 + 10.01: T0 + 29})

    assert [(b.start, b.end) for b in t.bands] == [(T0 + 10.01, T0 + 29)], "only the outage, not the ERP's error"


TRACEBACK = (
    "HTTPStatusError(\"Server error '503 ' for url 'http://w/suppliers/acme/quotes'\\nFor more information check: "
    'https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/503")\nTraceback (most recent call last):\n'
    '  File "/srv/replenisher/adapters/http.py", line 75, in check\n    response.raise_for_status()\n'
)


def test_a_step_retried_because_a_supplier_answers_503_is_a_retrying_step_not_an_outage() -> None:
    j = Journal()
    j.command("Input", T0)
    j.step(names.decide(0), T0 + 0.01, 0.001)
    # Restate journals a step only once it succeeds: until then only its failures name it.
    j.failed_attempt(T0 + 0.05, TRACEBACK, command="get_quotes 0")
    inv = invocation(
        {
            "id": "inv_1",
            "status": "backing-off",
            "retry_count": 4,
            "last_failure": "[500 Internal] " + TRACEBACK,
            "last_failure_error_code": "RT0007",
            "last_failure_related_command_name": "get_quotes 0",
            "next_retry_at": iso(T0 + 20),
            "created_at": iso(T0),
        }
    )
    t = timeline(j, None, invocation=inv, now=T0 + 15)

    assert t.bands == [], "a supplier's 503 is not the service being down"
    step = t.retrying_step
    assert step is not None and step.name == "get_quotes" and step.end is None
    assert (step.attempts, step.next_attempt_at) == (4, T0 + 20)
    assert step.errors == ["HTTPStatusError(\"Server error '503 ' for url 'http://w/suppliers/acme/quotes'\")"]
    assert t.status.startswith("retrying get_quotes: 4 attempts failed; last error: HTTPStatusError")
    assert "next attempt 08:00:20" in t.status
    text = render_text(t, width=160)
    assert "Traceback" not in text and "service down" not in text.split("key:")[0]
    assert "get_quotes is being retried: 4 attempts failed" in text
    page = render_html(t)
    assert page.count("Traceback (most recent call last)") == 1, "once, folded"
    folded = re.search(r"<details><summary>details</summary><pre>(.*?)</pre></details>", page, re.S)
    assert folded is not None and "Traceback" in folded.group(1)
    assert "data-kind='outage'" not in page


def test_two_outages_are_two_bands_each_ending_when_the_service_answered_again() -> None:
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    j.wait("approval-0", T0 + 0.1, deadline=T0 + 500)
    refused = "error when calling 'http://127.0.0.1:9080/': Connection refused"
    j.failed_attempt(T0 + 10, refused, "RT0010")
    j.failed_attempt(T0 + 100, refused, "RT0010")
    j.failed_attempt(T0 + 130, refused, "RT0010")
    t = timeline(j, None, answered={T0 + 10: T0 + 40, T0 + 100: T0 + 160})

    assert [(b.start, b.end) for b in t.bands] == [(T0 + 10, T0 + 40), (T0 + 100, T0 + 160)]
    assert all(b.ended_by == "the service answered again" for b in t.bands)
    assert "08:00:10 to 08:00:40, when the service answered again" in render_text(t, width=200)


def test_a_decided_approval_shows_who_when_limit_note_and_channel_instead_of_why_it_waited() -> None:
    from replenisher.timeline.model import Decision

    state = state_with(
        ("get_quotes", "need prices", "ok"),
        ("wait_for_approval", "the manager has not decided yet", "approved up to 4.40"),
    )
    decision = Decision(round=0, po_number="PO-9", approved=True, up_to=4.4, by="Dana", note="ok for Q1")
    decision.channel = "manager"
    t = timeline(quoted_then_approved(), state, decisions=[decision])

    wait = next(turn for turn in t.turns if turn.tool == "wait_for_approval")
    assert wait.decision is not None and wait.decision.at == T0 + 12.0, "when the run received it"
    line = wait.decision.line()
    assert line == (
        "approved up to 4.40 (PO-9) · by Dana · signed by the manager's key · at 2027-01-15 08:00:12 UTC"
        " · note: ok for Q1"
    )
    text = render_text(t, width=200)
    assert f"decision: {line}" in text and "the manager has not decided yet" not in text
    assert "round 1: approved up to 4.40" in text
    assert "data-decision" in render_html(t)


def test_an_approval_decided_after_a_reminder_shows_the_decision_not_why_it_waited() -> None:
    from replenisher.timeline.model import Decision

    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    j.step("get_quotes 0", T0 + 0.1, 0.5)
    j.step(names.decide(1), T0 + 0.9, 0.001)
    promise, timer = j.wait("approval-0", T0 + 1.0, deadline=T0 + 16.0)
    j.notify(timer, T0 + 16.0, kind="Sleep")  # the reminder's point, half-way through the window
    j.step("remind manager 50%", T0 + 16.01, 0.01)
    j.command("Sleep", T0 + 16.03, wake_up_time=int((T0 + 31.0) * 1000))
    j.notify(promise, T0 + 20.0, kind="GetPromise")
    j.step(names.decide(2), T0 + 20.1, 0.001)
    state = state_with(
        ("get_quotes", "need prices", "ok"),
        ("wait_for_approval", "the manager has not decided yet", "the manager rejected PO-9"),
    )
    decision = Decision(round=0, po_number="PO-9", approved=False, by="Dana", note="too dear")
    t = timeline(j, state, decisions=[decision])

    wait = t.turns[1]
    assert wait.action is not None and wait.action.kind == "wait", "the reminder is a step of the wait, not its action"
    assert wait.action.ended_by == "message" and wait.action.end == T0 + 20.0
    assert wait.decision is not None and wait.decision.line().startswith("rejected (PO-9) · by Dana")
    for page in (render_text(t, width=200), render_html(t)):
        assert "the manager has not decided yet" not in page, "a decided round never reads as undecided"
    assert "<b>message</b> · the manager rejected PO-9" in render_html(t)


def test_a_second_wait_for_the_same_reply_after_a_chase_is_drawn_with_its_length() -> None:
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    j.step("place_order 0", T0 + 0.1, 0.01)
    j.step(names.decide(1), T0 + 0.2, 0.001)
    promise, timer = j.wait("supplier-reply-0", T0 + 0.3, deadline=T0 + 70.3)
    j.notify(timer, T0 + 70.3, kind="Sleep")
    j.step(names.decide(2), T0 + 70.4, 0.001)
    j.step("chase_supplier 2", T0 + 70.5, 0.01)
    j.step(names.decide(3), T0 + 70.6, 0.001)
    # the run reads the promise once: waiting again journals only the new timer
    timer2 = j.command("Sleep", T0 + 70.7, wake_up_time=int((T0 + 90.7) * 1000))
    j.notify(timer2, T0 + 90.7, kind="Sleep")
    j.step(names.decide(4), T0 + 90.8, 0.001)
    j.step("chase_supplier 4", T0 + 90.9, 0.01)
    j.step(names.decide(5), T0 + 91.0, 0.001)
    j.command("Sleep", T0 + 91.1, wake_up_time=int((T0 + 111.1) * 1000))
    j.notify(promise, T0 + 95.0, kind="GetPromise")  # the reply comes during the third wait
    state = state_with(
        ("place_order", "the price is approved", "ordered"),
        ("wait_for_supplier_reply", "waiting for the order confirmation", "the supplier has not replied in time"),
        ("chase_supplier", "the supplier went quiet", "chased"),
        ("wait_for_supplier_reply", "waiting for the order confirmation", "the supplier has not replied in time"),
        ("chase_supplier", "the supplier went quiet", "chased"),
        ("wait_for_supplier_reply", "waiting for the order confirmation", "the supplier replied"),
    )
    t = timeline(j, state)

    second, third = t.turns[3].action, t.turns[5].action
    assert second is not None and second.kind == "wait" and second.promise == "supplier-reply-0"
    assert (second.start, second.end, second.ended_by) == (T0 + 70.7, T0 + 90.7, "timeout")
    assert t.turns[3].end is not None and t.turns[3].start is not None
    assert t.turns[3].end - t.turns[3].start > 19, "the turn lasts as long as it waited, not 0 ms"
    assert third is not None and (third.end, third.ended_by) == (T0 + 95.0, "message")
    assert t.turns[1].action is not None and t.turns[1].action.ended_by == "timeout", "the first wait keeps its end"


def test_a_run_that_ordered_nothing_says_so_rather_than_0_of_0_received() -> None:
    rejected = ReplenishmentResult(
        run_id=RUN, sku="SKU-9", outcome="rejected", detail="too dear", po_number="PO-9", supplier="acme",
        turns=4, started_at=T0, ended_at=T0 + 20,
    )  # fmt: skip
    received = rejected.model_copy(update={"outcome": "received", "quantity_ordered": 80, "quantity_received": 80})
    for outcome, said in ((rejected, "nothing ordered"), (received, "80 of 80 received")):
        t = build_timeline(RUN, "SKU-9", now=T0 + 100, outcome=outcome)
        for page in (render_text(t, width=200), render_html(t)):
            assert said in page and "0 of 0" not in page


def test_how_long_a_run_took_is_in_calendar_days_not_called_business_days() -> None:
    # The run's clock counts weekends; the header divides by the day's length, so those are days.
    t = timeline(quoted_then_approved(), state_with(("get_quotes", "need prices", "ok")), now=T0 + 70)
    text, page = render_text(t, width=200), render_html(t)
    assert "running for 1.2min (7.0 days) · a day is 10.0s" in text
    assert "running for 1.2min (7.0 days)" in page
    assert "business day" not in text.split("\n")[1] and "business days)" not in page


def test_a_decision_through_the_console_does_not_read_as_decided_by_someone_else() -> None:
    from replenisher.timeline.model import Decision

    decision = Decision(round=0, approved=False, by="manager (console)", channel="operator", status="rejected")
    assert decision.line() == "rejected · by manager (console) · through the console or CLI"


def axis_labels(page: str) -> list[str]:
    axis = re.search(r"<g class='axis'>(.*?)</g>", page)
    assert axis is not None, "the chart has a time axis"
    return re.findall(r"<text[^>]*>([^<]*)</text>", axis.group(1))


def test_the_time_axis_is_labelled_at_round_days_not_at_equal_fractions_of_the_run() -> None:
    # 7 days of 10 s: gridlines every 2 days, not at 0, 1.2, 2.3, 3.5 … (the run's sixths).
    page = render_html(timeline(quoted_then_approved(), state_with(("get_quotes", "need prices", "ok")), now=T0 + 70))
    assert axis_labels(page) == ["day 0", "day 2", "day 4", "day 6"]


def test_a_run_without_a_day_length_is_labelled_in_round_durations() -> None:
    # No run state, so no day length: the axis counts time since the start, on the clock's multiples.
    page = render_html(timeline(quoted_then_approved(), None, now=T0 + 95))
    assert axis_labels(page) == ["0", "+30s", "+60s", "+90s"]


def test_an_outage_that_began_just_now_is_named_inside_the_chart_on_a_line_of_its_own() -> None:
    # The service went down at the very end of the chart: its label used to start there and run
    # off the picture's right edge ("servic"), on top of the "now" mark.
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    j.run("place_order 0", T0 + 59)
    j.failed_attempt(T0 + 59.5, "error when calling 'http://127.0.0.1:9080/': Connection refused", "RT0010")
    inv = invocation({"id": "inv_1", "status": "backing-off", "retry_count": 1, "created_at": iso(T0)})
    svg = render_html(timeline(j, None, invocation=inv, now=T0 + 60))
    width = float(re.search(r"viewBox='0 0 (\d+) (\d+)'", svg).group(1))  # type: ignore[union-attr]
    height = float(re.search(r"viewBox='0 0 \d+ (\d+)'", svg).group(1))  # type: ignore[union-attr]
    band = re.search(r"<g class='band'.*?<text ([^>]*)>service down</text>", svg)
    assert band is not None
    attrs = dict(re.findall(r"([\w-]+)='([^']*)'", band.group(1)))
    assert attrs.get("text-anchor") == "end" and float(attrs["x"]) <= width, "the words end inside the picture"
    now = re.search(r"<g class='now'>.*?<text x='[^']*' y='([^']*)'", svg)
    assert now is not None and float(now.group(1)) < float(attrs["y"]) <= height, "below the now mark, not on it"


def test_a_timed_out_approval_ends_in_a_cross_even_when_its_last_reminder_shares_that_cell() -> None:
    j = Journal()
    j.step(names.decide(0), T0, 0.001)
    j.step("get_quotes 0", T0 + 0.1, 0.5)
    j.step(names.decide(1), T0 + 0.9, 0.001)
    _, timer = j.wait("approval-0", T0 + 1.0, deadline=T0 + 16.0)
    j.notify(timer, T0 + 16.0, kind="Sleep")  # the reminder at half the window
    j.step("remind manager 50%", T0 + 16.01, 0.01)
    late = j.command("Sleep", T0 + 16.03, wake_up_time=int((T0 + 30.7) * 1000))
    j.notify(late, T0 + 30.7, kind="Sleep")  # the reminder just before the deadline
    j.step("remind manager 98%", T0 + 30.71, 0.01)
    last = j.command("Sleep", T0 + 30.73, wake_up_time=int((T0 + 31.0) * 1000))
    j.notify(last, T0 + 31.0, kind="Sleep")
    j.step(names.decide(2), T0 + 31.1, 0.001)
    state = state_with(
        ("get_quotes", "need prices", "ok"),
        ("wait_for_approval", "the manager has not decided yet", "no decision in time"),
        ("cancel", "no approval", "cancelled"),
    )
    t = timeline(j, state, now=T0 + 31.2)

    wait = t.turns[1].action
    assert wait is not None and wait.ended_by == "timeout" and wait.end == T0 + 31.0
    row = next(line for line in render_text(t, width=100).splitlines() if "wait_for_approval" in line)
    bar = row.split("|")[1]
    assert bar.rstrip().endswith("✗"), row
    assert bar.count("█") == 1, "the first reminder is drawn; the last one lies under the cross: " + row


def flooded_state() -> State:
    """A run a rival flooded with refused replies (distinct and repeated), then the real supplier's event."""
    state = state_with(("wait_for_supplier_reply", "", "the supplier replied"))
    for i in range(80):
        state.record_security_event("supplier:rival", f"reply about 'PO-{i}' does not match our order", T0 + i)
    for i in range(6):
        state.record_security_event("supplier:rival", "reply about 'PO-X' does not match our order", T0 + 100 + i)
    state.record_security_event("supplier:acme", "reply states delivery in 400 days, beyond the bound", T0 + 200)
    return state


def test_timelines_show_the_security_total_what_was_collapsed_and_dropped_and_the_latest_entries() -> None:
    t = build_timeline(RUN, "SKU-9", now=T0 + 300, state=flooded_state())
    text = render_text(t, width=200)
    page = render_html(t)
    for shown in (text, page):
        assert "security events: 87 (5 repeats collapsed into kept entries; 32 dropped to keep 50 entries " in shown
        assert "(supplier:rival 32)" in shown
        assert "supplier:acme: reply states delivery in 400 days, beyond the bound" in shown
        assert "supplier:rival (6 times, first 2027-01-15 08:01:40 UTC): reply about" in shown
    lines = [line for line in text.splitlines() if line.startswith("security: 2027")]
    assert len(lines) == 10 and "supplier:acme" in lines[0], "the latest ten, newest first"


def test_an_approval_promise_reads_back_as_its_round_and_a_key_that_names_none_as_nothing() -> None:
    payload = {"po_number": "PO-1", "approved": True, "by": "m"}
    value = json.dumps({"payload": payload, "sender": {"party": "manager"}, "arrived_at": 5.0})
    decision = decision_of(names.message_promise("approval", 3), value)
    assert decision is not None
    assert (decision.round, decision.po_number, decision.approved, decision.at) == (3, "PO-1", True, 5.0)
    assert decision_of("approval-x", value) is None
    assert decision_of(names.message_promise("approval", 3), "not json") is None
