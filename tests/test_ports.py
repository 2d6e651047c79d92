"""Free ports: each process that picks them may be given its own range, and the suite's workers are."""

from __future__ import annotations

import os
from itertools import pairwise

import pytest

from replenisher.stack.ports import FREE_PORTS_VARIABLE, free_port, free_port_range
from scheduling import worker_ranges


def test_free_ports_come_from_the_range_the_environment_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FREE_PORTS_VARIABLE, "20000-20050")
    picked = {free_port() for _ in range(10)}
    assert len(picked) == 10 and all(20000 <= port < 20050 for port in picked), picked


@pytest.mark.parametrize("value", ["20000", "20050-20000", "80-90", "a-b", "30000-70000"])
def test_a_range_that_is_not_one_is_refused_with_what_it_should_be(value: str) -> None:
    with pytest.raises(ValueError, match=f"{FREE_PORTS_VARIABLE}=.*LOW-HIGH"):
        free_port_range({FREE_PORTS_VARIABLE: value})


def test_workers_get_disjoint_slices_of_the_default_range() -> None:
    floor, top = free_port_range({})
    slices = worker_ranges(4, {})
    assert slices[0][0] == floor and slices[-1][1] <= top
    assert all(a[1] <= b[0] for a, b in pairwise(slices)), slices
    assert worker_ranges(2, {FREE_PORTS_VARIABLE: "20000-20100"}) == [(20000, 20050), (20050, 20100)]


def test_this_worker_picks_from_its_own_slice() -> None:
    """Under pytest-xdist every worker was given its slice at start (tests/conftest.py), so a port
    one worker's service holds while it is down is never another worker's to hand out."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if not worker or count < 2:
        pytest.skip("one process: nothing to share the ports with")
    low, high = worker_ranges(count, {})[int(worker.removeprefix("gw"))]
    assert os.environ[FREE_PORTS_VARIABLE] == f"{low}-{high}"
    assert low <= free_port() < high
