"""The security log: bounded, exact in its total, and no flood from one source hides another's event."""

from __future__ import annotations

import random

from tests.domain.factories import T0

from replenisher.domain.security_log import (
    DROPPED_SOURCES,
    EVENT_TEXT_LIMIT,
    LOST_BEFORE_FORWARDING,
    OTHER_SOURCES,
    SECURITY_LOG_BOUND,
    SecurityLog,
)


def exact(log: SecurityLog) -> None:
    """What is kept and what was dropped add up to the total, and the bound holds."""
    assert log.total == sum(e.count for e in log.recent) + log.dropped_total
    assert len(log.recent) <= SECURITY_LOG_BOUND
    assert len({e.seq for e in log.recent}) == len(log.recent)


def test_the_same_event_again_collapses_into_one_entry_with_a_count_and_first_and_last_times() -> None:
    log = SecurityLog()
    log.record("supplier:rival", "reply about PO-1 refused", T0)
    log.record("manager", "approval refused", T0 + 1)
    log.record("supplier:rival", "reply about PO-1 refused", T0 + 2)
    log.record("supplier:rival", "reply about PO-1 refused", T0 + 3)
    assert log.total == 4 and log.collapsed == 2 and log.dropped == {}
    assert [(e.source, e.count) for e in log.recent] == [("manager", 1), ("supplier:rival", 3)], "moved to newest"
    rival = log.recent[-1]
    assert (rival.first_at, rival.last_at) == (T0, T0 + 3)
    exact(log)


def test_the_same_text_from_another_source_or_run_is_another_entry() -> None:
    log = SecurityLog()
    log.record("supplier:rival", "reply refused", T0)
    log.record("supplier:acme", "reply refused", T0)
    log.record("supplier:acme", "reply refused", T0, run_id="replenish-SKU-1-2")
    assert [e.count for e in log.recent] == [1, 1, 1] and log.total == 3


def test_text_is_clipped_and_the_clipped_text_collapses() -> None:
    log = SecurityLog()
    log.record("operator", "x" * 1000, T0)
    log.record("operator", "x" * 999, T0 + 1)
    assert log.texts() == ["x" * EVENT_TEXT_LIMIT] and log.recent[0].count == 2


def test_a_500_event_flood_from_one_source_leaves_another_sources_single_event_kept() -> None:
    log = SecurityLog()
    log.record("manager", "forged approval before the flood", T0)
    for i in range(500):
        log.record("supplier:rival", f"reply about PO-{i} refused", T0 + 1 + i)
    log.record("supplier:acme", "delivery beyond the bound", T0 + 600)
    assert log.total == 502
    assert "forged approval before the flood" in log.texts()
    assert log.latest(1)[0].what == "delivery beyond the bound"
    kept_rival = sum(1 for e in log.recent if e.source == "supplier:rival")
    assert kept_rival == SECURITY_LOG_BOUND - 2
    assert log.dropped == {"supplier:rival": 500 - kept_rival}, "only the flooder's own entries were dropped"
    # The newest of the flood are the ones kept: its oldest went first.
    assert "reply about PO-499 refused" in log.texts() and "reply about PO-0 refused" not in log.texts()
    exact(log)


def test_while_fewer_sources_than_the_bound_exist_each_keeps_its_events() -> None:
    log = SecurityLog()
    sources = [f"supplier:s{i}" for i in range(SECURITY_LOG_BOUND - 1)]
    for s in sources:
        log.record(s, f"refused {s}", T0)
    for i in range(300):
        log.record("supplier:rival", f"junk {i}", T0 + i)
    for s in sources:
        assert f"refused {s}" in log.texts(), s
    assert set(log.dropped) == {"supplier:rival"} and log.dropped["supplier:rival"] == 299
    exact(log)


def test_eviction_takes_the_source_holding_most_and_counts_what_it_dropped_per_source() -> None:
    log = SecurityLog()
    for i in range(40):
        log.record("supplier:a", f"a {i}", T0 + i)
    for i in range(30):
        log.record("supplier:b", f"b {i}", T0 + 100 + i)
        log.record("supplier:b", f"b {i}", T0 + 100 + i)  # each twice: collapsed, counted twice
    held = {s: sum(1 for e in log.recent if e.source == s) for s in ("supplier:a", "supplier:b")}
    assert held == {"supplier:a": 25, "supplier:b": 25}, "evicted from whichever held most, down to even shares"
    assert log.dropped == {"supplier:a": 15, "supplier:b": 2 * 5}, "a dropped entry's repeats count too"
    assert log.total == 40 + 60
    exact(log)


def test_the_per_source_drop_counts_are_bounded_and_the_rest_count_under_other_sources() -> None:
    log = SecurityLog()
    n = 0
    for round_ in range(3):
        for s in range(DROPPED_SOURCES + 20):
            log.record(f"supplier:s{s}", f"refused {round_}", T0 + n)
            n += 1
    assert len(log.dropped) <= DROPPED_SOURCES + 1 and OTHER_SOURCES in log.dropped
    assert log.total == n
    exact(log)


def test_news_since_an_earlier_reading_counts_exactly_what_was_recorded_in_between() -> None:
    rng = random.Random(30)
    run = SecurityLog()
    told = SecurityLog()
    sku = SecurityLog()
    sources = ["supplier:rival", "supplier:acme", "manager", "decider", "warehouse"]
    for step in range(2000):
        # Mostly one flooding source with a few texts, sometimes many new ones at once.
        burst = rng.choice([1, 1, 1, 3, 70])
        for _ in range(burst):
            source = "supplier:rival" if rng.random() < 0.8 else rng.choice(sources)
            run.record(source, f"refused {rng.randrange(90)}", T0 + step)
        if rng.random() < 0.6:
            news = run.news_since(told, T0 + step)
            assert sum(n.count for n in news) == run.total - told.total
            sku.take(news, T0 + step, run_id="replenish-SKU-1-1")
            told = run.reading()
    sku.take(run.news_since(told, T0 + 2000), T0 + 2000, run_id="replenish-SKU-1-1")
    assert sku.total == run.total
    exact(run)
    exact(sku)


def test_news_when_more_than_the_bound_came_in_between_counts_the_lost_texts_per_source() -> None:
    run = SecurityLog()
    run.record("manager", "forged approval", T0)
    told = run.reading()
    run.record("manager", "forged approval", T0 + 1)  # grows a kept entry
    for i in range(120):
        run.record("supplier:rival", f"junk {i}", T0 + 2 + i)
    news = run.news_since(told, T0 + 200)
    assert sum(n.count for n in news) == 121
    manager = [n for n in news if n.source == "manager"]
    assert [(n.what, n.count) for n in manager] == [("forged approval", 1)]
    lost = [n for n in news if n.what == LOST_BEFORE_FORWARDING]
    assert [(n.source, n.count) for n in lost] == [("supplier:rival", 120 - (SECURITY_LOG_BOUND - 1))]


def test_a_reading_keeps_the_counts_it_was_taken_with_while_the_log_grows() -> None:
    """`reading` copies the entries, which `record` grows in place; a plain copy would share them
    and the news since would miss what collapsed into a kept entry."""
    run = SecurityLog()
    run.record("supplier:rival", "refused", T0)
    run.record("manager", "forged approval", T0)
    told, shared = run.reading(), run.model_copy()
    run.record("supplier:rival", "refused", T0 + 1)  # collapses into the kept entry
    run.record("manager", "forged approval", T0 + 2)
    assert [e.count for e in told.recent] == [1, 1] and told.total == 2
    assert sum(n.count for n in run.news_since(told, T0 + 3)) == 2
    assert sum(n.count for n in run.news_since(shared, T0 + 3)) == 0, "the control: shared entries grew too"
