"""The suite's scheduling over pytest-xdist workers (tests/scheduling.py), on a small suite run
by real pytest with two workers the way `make test` runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from scheduling import longest_first, write_durations

TESTS_DIR = Path(__file__).parent

CONFTEST = f"""
import os, sys
from pathlib import Path
sys.path.insert(0, {str(TESTS_DIR)!r})
SCHEDULE = True
if SCHEDULE:
    import scheduling
    from scheduling import pytest_collection_modifyitems, pytest_configure_node, pytest_xdist_make_scheduler
    scheduling.DURATIONS_FILE = Path(os.environ["DURATIONS"])

    def pytest_configure(config):
        scheduling.register_recorder(config)
"""

SHARED = """
import os, time
import pytest

@pytest.fixture(scope="module")
def stack():
    with open(os.environ["LOG"], "a") as f:
        f.write("stack made\\n")
    return object()

def test_one(stack): time.sleep(0.2)
def test_two(stack): time.sleep(0.2)
def test_three(stack): time.sleep(0.2)
def test_four(stack): time.sleep(0.2)
"""

PLAIN = """
import os, time
import pytest

def started(name):
    with open(os.environ["LOG"], "a") as f:
        f.write("started " + name + "\\n")

{tests}

@pytest.mark.slow
def test_slow():
    started("slow")
    time.sleep(0.5)
"""


def run_suite(
    tmp_path: Path, schedule: bool = True, recorded: dict[str, Any] | None = None, env: dict[str, str] | None = None
) -> list[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST.replace("SCHEDULE = True", f"SCHEDULE = {schedule}"))
    (tmp_path / "test_a_shared.py").write_text(SHARED)
    quick = "\n".join(f"def test_quick_{n}(): started('quick {n}'); time.sleep(0.05)" for n in range(12))
    (tmp_path / "test_b_plain.py").write_text(PLAIN.replace("{tests}", quick))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    log = tmp_path / "log.txt"
    durations = tmp_path / "durations.json"
    if recorded is not None:
        durations.write_text(json.dumps(recorded))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    argv += ["--dist", "loadgroup", "--no-loadscope-reorder", str(tmp_path)]
    done = subprocess.run(
        argv,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"LOG": str(log), "DURATIONS": str(durations), "PATH": "/usr/bin:/bin"} | (env or {}),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return log.read_text().splitlines()


def test_a_module_fixture_is_made_once_and_the_slow_test_starts_first(tmp_path: Path) -> None:
    lines = run_suite(tmp_path)
    assert lines.count("stack made") == 1, lines
    starts = [line for line in lines if line.startswith("started")]
    assert starts[0] == "started slow", starts


def test_the_control_without_it_the_fixture_is_made_per_worker_and_the_slow_test_starts_late(tmp_path: Path) -> None:
    lines = run_suite(tmp_path, schedule=False)
    assert lines.count("stack made") == 2, lines
    starts = [line for line in lines if line.startswith("started")]
    assert starts.index("started slow") > 0, starts


def test_the_longest_recorded_unit_starts_first_a_group_by_its_sum_and_an_unknown_slow_one_by_a_guess(
    tmp_path: Path,
) -> None:
    first = {f"test_b_plain.py::test_quick_{n}": 0.05 for n in range(12)} | {"test_b_plain.py::test_quick_7": 50.0}
    first |= {f"test_a_shared.py::test_{n}": 10.0 for n in ("one", "two", "three", "four")}  # 40 s together
    starts = [line for line in run_suite(tmp_path, recorded={"first": first}) if line.startswith("started")]
    assert starts[:2] == ["started quick 7", "started slow"], starts  # slow is not recorded: its guess is 30 s


def test_the_recorder_writes_each_tests_time_per_pass_and_where_it_ran(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.jsonl"
    record = {
        "REPLENISHER_TEST_DURATIONS": str(tmp_path / "durations.json"),
        "REPLENISHER_TEST_TIMELINE": str(timeline),
    }
    run_suite(tmp_path, env=record)
    first = json.loads((tmp_path / "durations.json").read_text())["first"]
    assert len(first) == 17, first
    assert first["test_b_plain.py::test_slow"] >= 0.5, first
    rows = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert {row["worker"] for row in rows} == {"gw0", "gw1"}, rows
    assert all(row["stop"] >= row["start"] > 0 for row in rows), rows
    slow_call = next(row for row in rows if row["test"].endswith("test_slow") and row["when"] == "call")
    assert slow_call["stop"] - slow_call["start"] >= 0.5, slow_call

    run_suite(tmp_path, recorded=None, env={**record, "REPLENISHER_TEST_ALWAYS_REPLAY": "1"})
    both = json.loads((tmp_path / "durations.json").read_text())
    assert both["first"] == first, "the always-replay pass keeps the first pass's times"
    assert len(both["always_replay"]) == 17, both


def item(nodeid: str, slow: bool = False) -> pytest.Item:
    return cast(pytest.Item, SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: object() if slow else None))


def test_a_group_counts_as_the_sum_of_its_tests_and_keeps_its_order() -> None:
    items = [item("a.py::one"), item("a.py::two"), item("b.py::long"), item("c.py::slow", slow=True), item("d.py::x")]
    groups = {"a.py::one": "a.py", "a.py::two": "a.py"}
    durations = {"a.py::one": 20.0, "a.py::two": 25.0, "b.py::long": 40.0, "d.py::x": 2.0}
    longest_first(items, groups, durations)
    assert [i.nodeid for i in items] == ["a.py::one", "a.py::two", "b.py::long", "c.py::slow", "d.py::x"]
    longest_first(items, {}, durations)  # without the group, the 40 s test goes first
    assert [i.nodeid for i in items] == ["b.py::long", "c.py::slow", "a.py::two", "a.py::one", "d.py::x"]


def test_a_partial_recording_updates_the_tests_it_ran_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "durations.json"
    write_durations(path, "first", {"a.py::one": 20.04, "b.py::two": 3.0})
    write_durations(path, "always_replay", {"a.py::one": 30.0})
    write_durations(path, "first", {"a.py::one": 12.26})  # `-k one`: only that test ran
    assert json.loads(path.read_text()) == {
        "always_replay": {"a.py::one": 30.0},
        "first": {"a.py::one": 12.3, "b.py::two": 3.0},
    }
