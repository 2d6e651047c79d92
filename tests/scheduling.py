"""How the suite's tests are handed to the pytest-xdist workers: `make test` runs
`-n 4 --dist loadgroup --no-loadscope-reorder`, and tests/conftest.py takes these hooks.

xdist's default (`load`) hands each worker a run of consecutive tests (a quarter of its share at
first), so one worker could hold several of the slow tests while the others ran out of work,
and a test of tens of seconds that started late kept the session waiting on one worker while
the machine had cores to spare. Here, instead:

- the tests marked `slow` (tens of seconds each, from CI's `--durations` list) go first, so they
  start at once on every worker and the short ones fill in around them;
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
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from replenisher.stack.ports import free_port_range

WIDER_THAN_A_TEST = ("class", "module", "package")
GROUPS_FILE = "replenisher_test_groups"  # the key in each worker's workerinput


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


def slow_first(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the rest keep their order


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow_first(items)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get(GROUPS_FILE):
        path = Path(workerinput[GROUPS_FILE])
        mine = path.with_name(f"{path.name}.{workerinput['workerid']}")
        mine.write_text(json.dumps(groups_of(items)))
        mine.replace(path)  # every worker collects the same tests: the last one's file is theirs too


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
    Units go out in collection order (`--no-loadscope-reorder`), so the slow tests first."""

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
