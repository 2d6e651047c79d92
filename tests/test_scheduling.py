"""The suite's scheduling over pytest-xdist workers (tests/scheduling.py), on a small suite run
by real pytest with two workers the way `make test` runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS_DIR = Path(__file__).parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS_DIR)!r})
SCHEDULE = True
if SCHEDULE:
    from scheduling import pytest_collection_modifyitems, pytest_configure_node, pytest_xdist_make_scheduler
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


def run_suite(tmp_path: Path, schedule: bool = True) -> list[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST.replace("SCHEDULE = True", f"SCHEDULE = {schedule}"))
    (tmp_path / "test_a_shared.py").write_text(SHARED)
    quick = "\n".join(f"def test_quick_{n}(): started('quick {n}'); time.sleep(0.05)" for n in range(12))
    (tmp_path / "test_b_plain.py").write_text(PLAIN.replace("{tests}", quick))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    log = tmp_path / "log.txt"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"]
    argv += ["--dist", "loadgroup", "--no-loadscope-reorder", str(tmp_path)]
    done = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env={"LOG": str(log), "PATH": "/usr/bin:/bin"}
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
