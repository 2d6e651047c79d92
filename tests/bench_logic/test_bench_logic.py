"""The bench's own logic, without running a benchmark: its retry, its closing line, its plans,
and the table on the docs' benchmarks page (docs/benchmarks.md), which must be what the committed
results.json says."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import bench.report
import pytest
from bench.ab import unpack
from bench.model_calls import RunCount, lines, per_replenishment
from bench.plan import FULL, QUICK
from bench.report import END, PAGE, PEERS, START, idle_sizes_lines, page_table, summary_line, table, write_page
from bench.restart import cpu_grown, recovery_share
from bench.retry import TransientError, once_more

from support import REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "results" / "results.json"


# --- waiting on progress, not on a clock ---------------------------------------------------


async def test_a_slow_count_that_keeps_growing_is_waited_for_and_a_stalled_one_fails() -> None:
    from bench.polling import poll_progress

    seen = iter([0, 1, 1, 2, 3])

    async def growing() -> int:
        return next(seen)

    await poll_progress(growing, 3, stall=5.0, what="runs", interval=0.001)
    assert next(seen, None) is None, "it read until the target, and no further"

    async def stuck() -> int:
        return 1

    with pytest.raises(TimeoutError, match=re.escape("runs: 1 of 3, and none more for 0.05s")):
        await poll_progress(stuck, 3, stall=0.05, what="runs", interval=0.01)


# --- one retry, and only one --------------------------------------------------------------


class Flaky:
    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.attempts: list[int] = []

    async def __call__(self, attempt: int) -> str:
        self.attempts.append(attempt)
        if self.errors:
            raise self.errors.pop(0)
        return f"measured on attempt {attempt}"


async def test_a_transient_error_measures_again_once_and_is_recorded() -> None:
    retries: list[dict[str, Any]] = []
    flaky = Flaky(ConnectionResetError("reset by peer"))
    assert await once_more("throughput", flaky, retries, say=lambda _: None) == "measured on attempt 1"
    assert flaky.attempts == [0, 1]
    assert retries == [{"measurement": "throughput", "error": "ConnectionResetError: reset by peer"}]


async def test_the_system_fails_when_the_retry_fails_too() -> None:
    retries: list[dict[str, Any]] = []
    flaky = Flaky(TransientError("HTTP 503"), TransientError("HTTP 503 again"))
    with pytest.raises(TransientError, match="again"):
        await once_more("wake-up", flaky, retries, say=lambda _: None)
    assert flaky.attempts == [0, 1] and len(retries) == 1


async def test_a_real_failure_is_not_retried() -> None:
    retries: list[dict[str, Any]] = []
    flaky = Flaky(RuntimeError("not every replenishment ended received"))
    with pytest.raises(RuntimeError, match="received"):
        await once_more("throughput", flaky, retries, say=lambda _: None)
    assert flaky.attempts == [0] and retries == []


# --- the closing line ---------------------------------------------------------------------


def level(concurrency: int, per_s: float, cpu: dict[str, float]) -> dict[str, Any]:
    return {"concurrency": concurrency, "per_s": per_s, "cpu_ms_per_op": cpu, "latency": {"p50_ms": 1.0}}


def wake(cpu: dict[str, float]) -> dict[str, Any]:
    return {"cold": {"30": {"cpu_ms_per_op": cpu, "latency": {"p50_ms": 1.0, "p99_ms": 2.0}}}}


def idle(waiting: int, engine_mb: float, service_mb: float) -> dict[str, Any]:
    return {
        "waiting": waiting,
        "memory_mb": {"engine": {"rss_mb": engine_mb, "pss_mb": engine_mb}, "service": {"pss_mb": service_mb}},
    }


def synthetic() -> dict[str, Any]:
    return {
        "systems": {
            "restate": {"throughput": [level(10, 20.0, {"service": 30.0, "engine": 10.0}), level(50, 25.5, {})]},
            "restate-suspending": {
                "wake": wake({"service": 4.0, "engine": 6.0}),
                # 1,000 more waiting runs, 12 MB more engine memory: 12.3 KB a run; the service's is not counted
                "idle": [idle(100, engine_mb=100.0, service_mb=90.0), idle(1100, engine_mb=112.0, service_mb=95.0)],
            },
            "temporal": {
                "throughput": [level(10, 3.0, {"service": 200.0, "engine": 100.0})],
                "wake": wake({"service": 70.0, "engine": 50.0, "load generator": 999.0}),
            },
            "dbos-postgres": {"throughput": [level(10, 7.0, {"service": 100.0, "engine": 60.0})]},
            "asyncio": {"throughput": [level(10, 80.0, {"service": 10.0})]},
        }
    }


def test_the_closing_line_has_every_figure_in_its_fixed_form() -> None:
    line = summary_line(synthetic())
    # ours 40 ms against the floor's 10 (4.0x); Temporal 300 (7.5x), DBOS 160 (4.0x); throughput
    # 25.5/s against the floor's 80 (0.32x); the engine 12 MB for 1,000 more waiting runs
    assert line == (
        "bench: cpu_per_replenishment_ms=40.0 vs_floor=4.0x vs_temporal=7.5x vs_dbos_pg=4.0x "
        "wake_cold_cpu_ms=10.0 wake_vs_temporal=12.0x throughput_per_s=25.5 vs_floor_throughput=0.32x "
        "engine_kb_per_waiting_run=12.3"
    )


def test_the_closing_line_says_n_a_for_a_system_not_measured() -> None:
    results = synthetic()
    del results["systems"]["temporal"]
    del results["systems"]["asyncio"]
    del results["systems"]["restate-suspending"]["idle"]
    line = summary_line(results)
    assert re.fullmatch(
        r"bench: cpu_per_replenishment_ms=40\.0 vs_floor=n/a vs_temporal=n/a vs_dbos_pg=4\.0x wake_cold_cpu_ms=10\.0 "
        r"wake_vs_temporal=n/a throughput_per_s=25\.5 vs_floor_throughput=n/a engine_kb_per_waiting_run=n/a",
        line,
    ), line


# --- sizes --------------------------------------------------------------------------------


def test_the_quick_plan_is_large_enough_to_mean_something() -> None:
    assert all(QUICK.samples(k) >= 30 for k in QUICK.wake_steps) and 30 in QUICK.wake_steps
    counts = dict(QUICK.throughput)
    assert counts[10] >= 100 and counts[50] >= 100


def test_the_full_plans_p99_comes_from_200_samples_or_more() -> None:
    assert FULL.samples(30) >= 200
    assert all(count >= 200 for concurrency, count in FULL.throughput)


def test_the_full_plan_takes_ours_and_the_floor_to_10000_waiting_and_names_only_real_peers() -> None:
    for ours in ("restate", "restate-suspending", "asyncio"):
        assert FULL.idle(ours)[-1] >= 10_000, ours
    assert set(FULL.idle_sizes_by_system) <= set(PEERS)
    # A peer's own sizes still give a slope over a tenfold range.
    assert all(sizes[-1] >= 10 * sizes[0] for sizes in FULL.idle_sizes_by_system.values())


# --- the benchmarks page's table is generated from the committed results ---------------------


def test_the_docs_table_is_the_one_the_committed_results_make() -> None:
    results = json.loads(RESULTS.read_text())
    assert PAGE == REPO_ROOT / "docs" / "benchmarks.md"
    assert page_table() == table(results), f"{PAGE}: run `python -m bench.report --table`"
    assert summary_line(results) in (page_table() or "")
    # The bench writes the docs, never the README: no markers there for it to fill.
    assert START not in (REPO_ROOT / "README.md").read_text()


def test_the_report_rewrites_only_the_table_between_the_pages_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\nprose\n\n{START}\nan old table\n{END}\n\nmore prose\n")
    monkeypatch.setattr(bench.report, "PAGE", page)
    results = json.loads(RESULTS.read_text())
    assert write_page(table(results))
    assert page.read_text() == f"# Benchmarks\n\nprose\n\n{START}\n{table(results)}{END}\n\nmore prose\n"
    page.write_text("# Benchmarks without markers\n")
    assert not write_page(table(results))
    assert page.read_text() == "# Benchmarks without markers\n"


# --- model calls: the stand-in's request log against the runs' ledgers ---------------------


def decision(sku: str) -> dict[str, Any]:
    return {"tools": [{"name": "get_quotes"}, {"name": "done"}], "messages": [{"role": "user", "content": sku}]}


def reading(sku: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"the supplier's reply about {sku}"}]}


def ledger(calls: int, only_allowed: int, **overruled: int) -> dict[str, Any]:
    return {"calls": calls, "only_allowed": only_allowed, "refused": 0, "fallbacks": 0, "budget_stops": 0, **overruled}


def two_runs() -> list[RunCount]:
    # 7 turns: 2 taken without a call, 5 decisions, plus one reading of the supplier's reply.
    a = RunCount("MC-000", 7, ledger(6, 2), [decision("MC-000")] * 5 + [reading("MC-000")])
    # 6 turns: 1 without a call, 5 decisions, no reply to read.
    b = RunCount("MC-001", 6, ledger(5, 1), [decision("MC-001")] * 5)
    return [a, b]


def test_model_calls_per_replenishment_from_the_stand_in_and_the_ledgers_agree() -> None:
    figures = per_replenishment(two_runs(), total_requests=11)
    assert figures["agree"] and figures["disagreements"] == []
    assert figures["replenishments"] == 2 and figures["turns_per_replenishment"] == 6.5
    assert figures["stand_in_api"] == {
        "model_calls_per_replenishment": 5.5,
        "decisions_per_replenishment": 5.0,
        "readings_per_replenishment": 0.5,
        "turns_without_a_call_per_replenishment": 1.5,
    }
    assert figures["ledgers"] == {"model_calls_per_replenishment": 5.5, "only_allowed_per_replenishment": 1.5}
    assert "the two counts agree" in " ".join(lines(figures))


def test_a_call_the_ledger_missed_is_a_disagreement() -> None:
    a, b = two_runs()
    missed = RunCount(a.sku, a.turns, ledger(5, 2), a.requests)  # the stand-in answered 6 calls
    figures = per_replenishment([missed, b], total_requests=11)
    assert not figures["agree"]
    assert figures["disagreements"] == ["MC-000: ledger 5 calls, stand-in received 6"]
    assert "DISAGREE" in lines(figures)[-1]


def test_a_turn_skipped_without_being_recorded_is_a_disagreement() -> None:
    a, b = two_runs()
    # Same calls, but the ledger claims only 1 turn went without a call where 7 turns had 5 decisions.
    unrecorded = RunCount(a.sku, a.turns, ledger(6, 1), a.requests)
    figures = per_replenishment([unrecorded, b], total_requests=11)
    assert not figures["agree"] and "7 turns and 5 decision calls" in figures["disagreements"][0]


def test_a_request_no_run_accounts_for_is_a_disagreement() -> None:
    figures = per_replenishment(two_runs(), total_requests=12)
    assert figures["disagreements"] == ["the stand-in received 12 requests, the runs account for 11"]
    # The stand-in's figure is what it received, not what the runs claim.
    assert figures["stand_in_api"]["model_calls_per_replenishment"] == 6.0


def test_overruled_turns_do_not_pair_calls_with_turns_and_say_so() -> None:
    a, b = two_runs()
    refused = RunCount(a.sku, a.turns, ledger(6, 2, refused=1), a.requests)
    assert per_replenishment([refused, b], total_requests=11)["disagreements"] == [
        "MC-000: turns were overruled ({'refused': 1}): calls do not pair with turns"
    ]


def test_the_model_calls_line_appears_only_with_model_calls_in_the_results() -> None:
    results = json.loads(RESULTS.read_text())
    assert "model_calls" not in results or "Ours, model calls" in table(results)
    with_calls = {**results, "model_calls": {"label": "x", **per_replenishment(two_runs(), 11)}}
    text = table(with_calls)
    assert "Ours, model calls per replenishment (Claude decider, stand-in API, 2 replenishments): " in text
    assert "stand-in's request log 5.5 (5 decisions, 0.5 reply readings), runs' ledgers 5.5" in text
    assert summary_line(with_calls) == summary_line(results)  # the closing line does not change


def test_the_partitions_bench_refuses_two_equal_counts_before_starting_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.partitions import main

    with pytest.raises(SystemExit) as exit_:
        main(["--counts", "2", "2"])
    assert exit_.value.code == 2
    assert "two different counts" in capsys.readouterr().err


PERF_REPORT = """# Samples: 12K of event 'cpu-clock:pppH'
#
    12.00%  [k] finish_task_switch.isra.0
     6.00%  [.] memcpy
     4.00%  [k] iowrite16
     3.00%  [.] rocksdb::InlineSkipList<rocksdb::MemTableRep::KeyComparator const&>::FindSpliceForLevel<true>
     2.00%  [.] ZSTD_compressBlock_doubleFast
     2.00%  [.] restate_worker::partition::PartitionProcessor<T>::run_inner::{{closure}}
     1.00%  [.] <metrics_exporter_prometheus::recorder::PrometheusRecorder as metrics::recorder::Recorder>::register
     1.00%  [k] tcp_sendmsg_locked
     1.00%  [.] some_unknown_symbol
"""


def test_the_engines_samples_go_to_their_layers_and_add_up_to_the_whole() -> None:
    from bench.engine_profile import KERNEL_OTHER, USER_OTHER, summarise_report

    summary = summarise_report(PERF_REPORT)
    share = summary["share"]
    assert abs(sum(share.values()) - 1) < 0.01
    total = 32.0

    def near(x: float, within: float) -> Any:
        return pytest.approx(x, abs=within)

    assert share["kernel: switching and waking threads"] == near(12 / total, 0.001)
    assert share["kernel: disk writes and syncs"] == near(4 / total, 0.001)
    assert share["kernel: loopback network (to the service)"] == near(1 / total, 0.001)
    assert share["copies and allocation (memcpy, jemalloc)"] == near(6 / total, 0.001)
    assert share["RocksDB (memtables, writes, reads)"] == near(3 / total, 0.001)
    assert share["compression (zstd, lz4: RocksDB's blocks and WAL)"] == near(2 / total, 0.001)
    assert share["metrics and tracing"] == near(1 / total, 0.001), "prometheus's own symbols, not Restate's"
    assert share["Restate: partition processor, invoker, log, ingress (restate_*)"] == near(2 / total, 0.001)
    assert share[USER_OTHER] == near(1 / total, 0.001) and share[KERNEL_OTHER] == 0
    assert summary["top_self"][0] == {"symbol": "[k] finish_task_switch.isra.0", "share": near(12 / total, 0.001)}
    assert summarise_report("# nothing sampled\n") == {}


def test_the_report_says_why_the_engine_was_not_sampled() -> None:
    from bench.engine_profile import summarise_report
    from bench.report import engine_profile_table

    lines = engine_profile_table({"engine": {"unavailable": "perf is not installed (Debian: linux-perf)"}}, {})
    why = "perf is not installed (Debian: linux-perf)"
    assert lines[-1] == f"The engine (restate-server) was not sampled in this run: {why}."

    table = engine_profile_table({"engine": summarise_report(PERF_REPORT) | {"samples": "12K"}}, {})
    assert "| kernel: switching and waking threads | 38% | n/a |" in table
    assert any(line.startswith("Hottest symbols of the engine's CPU") for line in table)


SERVICE_PERF_REPORT = """# Samples: 4K of event 'cpu-clock:ppp'
#
    25.00%  [kernel.kallsyms]                          [k] finish_task_switch.isra.0
    10.00%  libpython3.11.so.1.0                       [.] _PyEval_EvalFrameDefault
     8.00%  _granian.cpython-311-x86_64-linux-gnu.so   [.] 0x0000000001069702
     4.00%  _internal.cpython-311-x86_64-linux-gnu.so  [.] restate_sdk_shared_core::vm::CoreVM::notify_input
     2.00%  _pydantic_core.cpython-311-x86_64-linux-gnu.so  [.] validate_json
     2.00%  loop.cpython-311-x86_64-linux-gnu.so       [.] __pyx_f_6uvloop_4loop_6Handle__run
     2.00%  libc.so.6                                  [.] __memmove_avx_unaligned_erms
     1.00%  [kernel.kallsyms]                          [k] tcp_sendmsg_locked
     1.00%  [kernel.kallsyms]                          [k] do_syscall_64
     1.00%  _json.cpython-311-x86_64-linux-gnu.so      [.] scanstring_unicode
"""


def test_the_services_native_samples_go_to_their_libraries_and_add_up_to_the_whole() -> None:
    from bench.service_profile import LIBRARY_OTHER, summarise_report

    summary = summarise_report(SERVICE_PERF_REPORT)
    share = summary["share"]
    total = 56.0
    assert abs(sum(share.values()) - 1) < 0.01
    assert share["kernel: switching and waking threads"] == pytest.approx(25 / total, abs=0.001)
    assert share["kernel: loopback network (to the service)"] == pytest.approx(1 / total, abs=0.001)
    assert share["kernel: the rest (interrupts, page faults, timers, syscalls)"] == pytest.approx(1 / total, abs=0.001)
    assert share["granian's Rust side (HTTP/2, handing each message to Python and back)"] == pytest.approx(
        8 / total, abs=0.001
    )
    assert share["the Restate SDK's Rust VM (protocol, journal)"] == pytest.approx(4 / total, abs=0.001)
    assert share["pydantic-core"] == pytest.approx(2 / total, abs=0.001), "not the SDK's _internal"
    assert share["uvloop (the event loop)"] == pytest.approx(2 / total, abs=0.001)
    assert share[LIBRARY_OTHER] == pytest.approx(1 / total, abs=0.001)
    assert summary["top_self"][0]["symbol"] == "[k] finish_task_switch.isra.0 ([kernel.kallsyms])"
    assert summarise_report("# nothing sampled\n") == {}


def test_the_report_shows_the_services_native_profile_or_why_there_is_none() -> None:
    from bench.report import service_native_table
    from bench.service_profile import summarise_report

    native = summarise_report(SERVICE_PERF_REPORT) | {"samples": "4K"}
    lines = service_native_table({"native": native}, {"native": native | {"samples": "1K"}})
    assert any(
        line.startswith("Where the service's CPU goes natively") and "4K samples replenishing, 1K waking" in line
        for line in lines
    )
    assert "| kernel: switching and waking threads | 45% | 45% |" in lines
    assert lines[-1].startswith("Hottest symbols of the service's CPU, waking: `[k] finish_task_switch.isra.0")
    why = service_native_table({"native": {"unavailable": "perf is not installed (Debian: linux-perf)"}}, {})
    assert why[-1] == "The service was not sampled by perf in this run: perf is not installed (Debian: linux-perf)."
    assert service_native_table({}, {}) == [], "an older results.json without it: no section"


def test_an_ab_runs_closing_line_gives_the_named_side_as_a_multiple_of_the_other() -> None:
    from bench.ab import comparison

    h = [{"cpu_ms": 80.0, "per_s": 10.0}, {"cpu_ms": 84.0, "per_s": 12.0}, {"cpu_ms": 90.0, "per_s": 11.0}]
    g = [{"cpu_ms": 60.0, "per_s": 16.0}, {"cpu_ms": 70.0, "per_s": 14.0}, {"cpu_ms": 66.0, "per_s": 15.0}]
    assert comparison("servers", ("hypercorn", h), ("granian", g), over="granian") == (
        "servers: hypercorn_cpu_ms=84.0 granian_cpu_ms=66.0 cpu_ratio=0.79x "
        "hypercorn_per_s=11.00 granian_per_s=15.00 throughput_ratio=1.36x"
    )
    assert comparison("partitions", ("p1", g), ("p2", h), over="p1") == (
        "partitions: p1_cpu_ms=66.0 p2_cpu_ms=84.0 cpu_ratio=0.79x p1_per_s=15.00 p2_per_s=11.00 throughput_ratio=1.36x"
    )
    with pytest.raises(ValueError, match="neither side"):
        comparison("x", ("a", h), ("b", g), over="c")


def test_an_ab_run_that_woke_runs_says_so_in_a_line_before_its_closing_one(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.ab import closing_lines

    replicated = [
        {"cpu_ms": 80.0, "per_s": 10.0, "wake_cpu_ms": 20.0},
        {"cpu_ms": 84.0, "per_s": 12.0, "wake_cpu_ms": 22.0},
    ]
    local = [{"cpu_ms": 70.0, "per_s": 12.0, "wake_cpu_ms": 16.0}, {"cpu_ms": 66.0, "per_s": 14.0, "wake_cpu_ms": 17.0}]
    closing_lines("loglet", ("replicated", replicated), ("local", local), over="local")
    assert capsys.readouterr().out.splitlines() == [
        "loglet-wake: replicated_wake_cpu_ms=21.0 local_wake_cpu_ms=16.5 wake_cpu_ratio=0.79x",
        "loglet: replicated_cpu_ms=82.0 local_cpu_ms=68.0 cpu_ratio=0.83x "
        "replicated_per_s=11.00 local_per_s=13.00 throughput_ratio=1.18x",
    ]
    no_wakes = [{k: v for k, v in row.items() if k != "wake_cpu_ms"} for row in replicated]
    closing_lines("loglet", ("replicated", no_wakes), ("local", no_wakes), over="local")
    assert capsys.readouterr().out.startswith("loglet: "), "no wake line for rounds that woke nothing"


def test_the_loglet_bench_refuses_a_bad_option_before_starting_anything(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.loglet import main

    for bad in (["--wakes", "many"], ["--wakes", "-1"], ["--rounds", "0"]):
        with pytest.raises(SystemExit) as exit_:
            main(bad)
        assert exit_.value.code == 2
        assert bad[0] in capsys.readouterr().err


def test_the_table_says_how_many_runs_waited_for_each_systems_idle_cost() -> None:
    results = {
        "systems": {
            "restate": {"label": "ours", "idle": [{"waiting": 100}, {"waiting": 980}, {"waiting": 9960}]},
            "temporal": {"label": "Temporal", "idle": [{"waiting": 100}, {"waiting": 980}]},
            "asyncio": {"label": "floor"},
        }
    }
    (line,) = [x for x in idle_sizes_lines(results) if x]
    assert "ours 100, 980 and 9,960; Temporal 100 and 980." in line, line
    assert "floor" not in line
    assert idle_sizes_lines({"systems": {"asyncio": {"label": "floor"}}}) == []


# --- a cold wake after a worker restart carries its share of the restart's recovery (issue 33, item 4)


def committed(share: dict[str, float] | None = None) -> dict[str, Any]:
    """The committed results as a run made before the recovery was measured recorded them (no share
    anywhere), DBOS on PostgreSQL given `share` as a run now records it."""
    results: dict[str, Any] = json.loads(RESULTS.read_text())
    for system in results["systems"].values():
        system.pop("recovery_cpu_ms_per_cold_run", None)
    if share is not None:
        # K=10's share is not K=30's: each K's runs are recovered by a restart of their own.
        results["systems"]["dbos-postgres"]["recovery_cpu_ms_per_cold_run"] = {"10": {"service": 1.0}, "30": share}
    return results


def test_a_cold_wake_after_a_restart_is_charged_its_share_of_the_recovery_and_the_table_shows_the_share() -> None:
    cold = bench.report._wake_cpu("cold")
    before = committed()
    after = committed({"service": 150.0, "engine": 40.0})
    assert cold(after, "dbos-postgres") == pytest.approx(cold(before, "dbos-postgres") + 190.0)
    assert cold(after, "restate") == cold(before, "restate")  # a suspended run replays in its wake: no share
    assert bench.report._wake_cpu("hot")(after, "dbos-postgres") == bench.report._wake_cpu("hot")(
        before, "dbos-postgres"
    )
    rows = [line for line in table(after).splitlines() if line.startswith(f"| {bench.report.RECOVERY_ROW} |")]
    # A part of the row above, so no multiple of ours in brackets; n/a where nothing was restarted.
    assert rows == [f"| {bench.report.RECOVERY_ROW} | n/a | n/a | 190 ms | n/a | n/a |"], rows
    ours = cold(after, "restate")
    assert ours is not None
    dbos_pg = f"{cold(after, 'dbos-postgres'):.0f} ms ({cold(after, 'dbos-postgres') / ours:.1f}x)"
    assert f"| wake CPU (service+engine), K=30, suspended/cold | {ours:.1f} ms |" in table(after)
    assert dbos_pg in table(after)


def test_a_restarted_peers_share_goes_into_the_closing_lines_wake_ratio() -> None:
    results = synthetic()
    # Temporal's cold wake 120 ms against ours 10 (12.0x); a 6 ms share of its restart makes 12.6x.
    results["systems"]["temporal"]["recovery_cpu_ms_per_cold_run"] = {"30": {"service": 6.0, "engine": 0.0}}
    assert "wake_vs_temporal=12.6x" in summary_line(results)


def test_results_from_before_the_recovery_was_measured_keep_their_figures_and_no_recovery_row() -> None:
    assert bench.report.RECOVERY_ROW not in table(committed())
    assert "wake_vs_temporal=12.0x" in summary_line(synthetic())


def test_the_recovery_share_is_the_restart_with_runs_less_the_one_without_split_among_the_runs() -> None:
    restart = {"cpu_s": {"service": 12.5, "engine": 3.0}}
    empty = {"cpu_s": {"service": 2.5, "engine": 3.2}}
    # 10 s of the worker's CPU over 500 runs: 20 ms each; an engine that spent less is no negative cost
    assert recovery_share(restart, empty, 500) == {"service": 20.0, "engine": 0.0}


def test_cpu_grown_counts_new_processes_whole_and_drops_ended_ones() -> None:
    before = {1: 10.0, 2: 5.0, 3: 1.0}
    after = {1: 10.5, 3: 1.25, 4: 2.0}  # 2 ended (a connection of the old worker), 4 began
    assert cpu_grown(before, after) == pytest.approx(0.5 + 0.25 + 2.0)


def test_an_ab_side_is_the_commits_tree_and_a_bad_name_stops_the_run_clearly(tmp_path: Path) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    commit = unpack("HEAD", tmp_path / "head", REPO_ROOT)
    assert commit == head.stdout.strip()
    shown = subprocess.run(
        ["git", "show", "HEAD:services/replenisher/durable/app.py"], cwd=REPO_ROOT, capture_output=True, check=True
    )
    assert (tmp_path / "head" / "services" / "replenisher" / "durable" / "app.py").read_bytes() == shown.stdout
    assert (tmp_path / "head" / "bench" / "peers" / "restate_app.py").is_file()
    with pytest.raises(SystemExit, match="'no-such-commit' names no commit in"):
        unpack("no-such-commit", tmp_path / "bad", REPO_ROOT)
    assert not (tmp_path / "bad").exists()


def test_the_table_counts_every_invocation_made_from_results_that_have_it_and_keeps_the_kept_count() -> None:
    made = "| Restate invocations per replenishment, every one made (concurrency 10) |"
    kept = "| Restate invocations kept per replenishment, under its SKU's and run's keys (concurrency 10) |"
    before = committed()
    assert made not in table(before)  # the committed run counted only what Restate kept
    assert f"{kept} 10.0 |" in table(before)
    after = committed()
    at_10 = next(lv for lv in after["systems"]["restate"]["throughput"] if lv["concurrency"] == 10)
    at_10["invocations_made_per_replenishment"] = 16.0
    assert f"{made} 16.0 |" in table(after)
    assert f"{kept} 10.0 |" in table(after)
