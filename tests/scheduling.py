"""How the suite's tests are handed to the pytest-xdist workers: `make test` runs
`-n 4 --dist loadgroup --no-loadscope-reorder`, and tests/conftest.py takes these hooks.

xdist's default (`load`) hands each worker a run of consecutive tests (a quarter of its share at
first), so one worker could hold several of the slow tests while the others ran out of work,
and a test of tens of seconds that started late kept the session waiting on one worker while
the machine had cores to spare. Here, instead:

- the units go out longest first, by the time each took in a recorded run (tests/durations.json,
  one map per pass: `make test-durations` records it again), so the long ones start at once on
  every worker and the short ones fill in around them and at the end (longest-processing-time
  first: no worker is left with a long unit while the others have run out of work). A test the
  file does not know counts as the median known test, or as `SLOW_GUESS` seconds when marked
  `slow`;
- a module whose tests share a fixture wider than a test (a stack of its own, a built Lambda zip,
  an identity provider) is one unit of work on one worker, so that fixture is made once, as with
  a single process;
- every other test is its own unit, handed to whichever worker is free.

xdist's own `loadgroup` reads groups from `xdist_group` marks through the test's id, which it
rewrites; pytest 9 no longer takes that rewrite, so the groups would be silently lost. The
workers instead write the groups they collected to a file the controller names, and the
controller's scheduler (a `LoadScopeScheduling` whose scope is that group, else the test) reads
it once every worker has collected.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from replenisher.stack.ports import free_port_range

WIDER_THAN_A_TEST = ("class", "module", "package")
GROUPS_FILE = "replenisher_test_groups"  # the key in each worker's workerinput
DURATIONS_FILE = Path(__file__).with_name("durations.json")
RECORD_ENV = "REPLENISHER_TEST_DURATIONS"  # a path: the controller writes this run's durations there
TIMELINE_ENV = "REPLENISHER_TEST_TIMELINE"  # a path: each test's worker, start and end (JSON lines)
ALWAYS_REPLAY_ENV = "REPLENISHER_TEST_ALWAYS_REPLAY"
SLOW_GUESS = 30.0  # seconds, for a test marked slow that the durations file does not know yet


def worker_ranges(count: int, environ: Mapping[str, str]) -> list[tuple[int, int]]:
    """`count` disjoint, equal slices of the range `free_port` picks from under `environ`: one per
    worker (tests/conftest.py gives each its own through REPLENISHER_FREE_PORTS)."""
    floor, top = free_port_range(environ)
    size = (top - floor) // count
    return [(floor + i * size, floor + (i + 1) * size) for i in range(count)]


def shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture kept across tests of its module (or class, or package)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope in WIDER_THAN_A_TEST for defs in info.name2fixturedefs.values() for d in defs)


def groups_of(items: list[pytest.Item]) -> dict[str, str]:
    """Each test that shares a fixture wider than itself, with its module: one unit of work."""
    return {item.nodeid: item.nodeid.split("::", 1)[0] for item in items if shares_a_fixture(item)}


def this_pass(environ: Mapping[str, str]) -> str:
    """The key of this run's pass in the durations file: the always-replay pass takes longer, and not
    by the same factor for every test."""
    return "always_replay" if environ.get(ALWAYS_REPLAY_ENV) else "first"


def read_durations(path: Path, pass_name: str) -> dict[str, float]:
    if not path.exists():
        return {}
    recorded: dict[str, dict[str, float]] = json.loads(path.read_text())
    return recorded.get(pass_name, {})


def longest_first(items: list[pytest.Item], groups: Mapping[str, str], durations: Mapping[str, float]) -> None:
    """Sort `items` so the units (a group's tests together, else each test) come longest first, the
    tests of a unit in their own order. Every worker sorts its identical collection the same way."""
    typical = statistics.median(durations.values()) if durations else 1.0

    def guess(item: pytest.Item) -> float:
        if item.nodeid in durations:
            return durations[item.nodeid]
        return SLOW_GUESS if item.get_closest_marker("slow") is not None else typical

    unit_of = {item.nodeid: groups.get(item.nodeid, item.nodeid) for item in items}
    total: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        unit = unit_of[item.nodeid]
        total[unit] = total.get(unit, 0.0) + guess(item)
        first.setdefault(unit, index)
    # A stable sort: the tests of a unit keep their order.
    items.sort(key=lambda item: (-total[unit_of[item.nodeid]], first[unit_of[item.nodeid]]))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = groups_of(items)
    longest_first(items, groups, read_durations(DURATIONS_FILE, this_pass(os.environ)))
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get(GROUPS_FILE):
        path = Path(workerinput[GROUPS_FILE])
        mine = path.with_name(f"{path.name}.{workerinput['workerid']}")
        mine.write_text(json.dumps(groups))
        mine.replace(path)  # every worker collects the same tests: the last one's file is theirs too


class Recorder:
    """(controller) Each test's time, its setup, call and teardown together, and when and where it
    ran: written at the session's end where RECORD_ENV and TIMELINE_ENV say."""

    def __init__(self) -> None:
        self.durations: dict[str, float] = {}
        self.timeline: list[dict[str, Any]] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        worker = getattr(getattr(report, "node", None), "gateway", None)
        self.timeline.append(
            {
                "test": report.nodeid,
                "when": report.when,
                "worker": getattr(worker, "id", "main"),
                "start": report.start,
                "stop": report.stop,
            }
        )

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if path := os.environ.get(RECORD_ENV):
            write_durations(Path(path), this_pass(os.environ), self.durations)
        if path := os.environ.get(TIMELINE_ENV):
            Path(path).write_text("".join(json.dumps(row) + "\n" for row in self.timeline))


def write_durations(path: Path, pass_name: str, durations: Mapping[str, float]) -> None:
    """`durations` (to the tenth of a second) into this pass's map: a run of part of the suite
    (`PYTEST_ARGS=-k ...`) updates the tests it ran and keeps the others', and the other pass's."""
    recorded: dict[str, dict[str, float]] = json.loads(path.read_text()) if path.exists() else {}
    merged = recorded.get(pass_name, {}) | {test: round(seconds, 1) for test, seconds in durations.items()}
    recorded[pass_name] = dict(sorted(merged.items()))
    path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def register_recorder(config: pytest.Config) -> None:
    """(from conftest's pytest_configure) The recorder, on the controller, when a run asks for it."""
    if not hasattr(config, "workerinput") and (os.environ.get(RECORD_ENV) or os.environ.get(TIMELINE_ENV)):
        config.pluginmanager.register(Recorder(), "replenisher-test-recorder")


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown to a run without it
def pytest_configure_node(node: Any) -> None:
    """(controller) Where the workers write their groups."""
    node.workerinput[GROUPS_FILE] = str(_groups_file(node.config))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    return SharedFixtureScheduling(config, log, _groups_file(config))


def _groups_file(config: pytest.Config) -> Path:
    path: Path | None = getattr(config, "_replenisher_groups_file", None)
    if path is None:
        folder = Path(tempfile.mkdtemp(prefix="test-groups-"))
        path = folder / "groups.json"
        config._replenisher_groups_file = path  # type: ignore[attr-defined]
        config.add_cleanup(lambda: _remove(folder))
    return path


def _remove(folder: Path) -> None:
    for f in folder.iterdir():
        f.unlink()
    os.rmdir(folder)


class SharedFixtureScheduling(LoadScopeScheduling):
    """xdist's scope scheduling, a scope being a module whose tests share a fixture, else one test.
    Units go out in collection order (`--no-loadscope-reorder`), so the longest first."""

    def __init__(self, config: pytest.Config, log: Any, groups_file: Path) -> None:
        super().__init__(config, log)
        self._groups_file = groups_file
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            # Read once, when the controller first splits the collection: every worker has collected.
            found = self._groups_file.exists()
            self._groups = json.loads(self._groups_file.read_text()) if found else {}
        return self._groups.get(nodeid, nodeid)
