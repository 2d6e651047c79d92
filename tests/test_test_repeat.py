"""scripts/test_repeat.py (`make test-repeat`): its options, its reading of pytest's junit reports,
its report, its CPU hog and its clean clone, without running the suites it repeats."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support import REPO_ROOT, eventually


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_repeat_script", REPO_ROOT / "scripts" / "test_repeat.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


repeat = _load()

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" tests="3">
  <testcase classname="tests.operator.test_oncall" name="test_a_band" time="3.1">
    <failure message="AssertionError: it ends before the approval&#10;assert 12.5 &lt; 11.0&#10;&#10;more">
    Traceback (most recent call last):
    AssertionError</failure>
  </testcase>
  <testcase classname="tests.e2e.test_calendar" name="test_holiday" time="1.0">
    <error>line 1
line 2
line 3
line 4
line 5
line 6
line 7
E   TimeoutError: the stack did not come up</error>
  </testcase>
  <testcase classname="tests.e2e.test_calendar" name="test_monday" time="2.0"/>
</testsuite></testsuites>
"""


def test_the_options_default_to_five_rounds_of_the_e2e_and_operator_suites_on_head_with_no_hog() -> None:
    options = repeat.parse([])
    assert (options.rounds, options.hog, options.rev) == (5, 0, "HEAD")
    assert options.suites == ["tests/e2e", "tests/operator"] and options.pytest_args == []
    assert not any(options.loaded(n) for n in range(1, 6)), "no hog asked for, none in any round"


def test_a_hog_of_n_processes_beside_every_round_or_the_odd_ones_and_pytest_options_after_the_dashes() -> None:
    argv = "--rounds 2 --hog 2 --rev main~1 --suites tests/operator tests/e2e/x.py -- -n 2 -x"
    options = repeat.parse(argv.split())
    assert (options.rounds, options.hog, options.rev) == (2, 2, "main~1")
    assert options.suites == ["tests/operator", "tests/e2e/x.py"] and options.pytest_args == ["-n", "2", "-x"]
    assert [options.loaded(n) for n in (1, 2)] == [True, True]
    alternate = repeat.parse(["--rounds", "3", "--hog", "2", "--hog-rounds", "alternate"])
    assert [alternate.loaded(n) for n in (1, 2, 3)] == [True, False, True]


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--hog", "-1"], ["--hog-rounds", "sometimes"]])
def test_impossible_options_are_refused_with_a_reason(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        repeat.parse(argv)
    assert exit_.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_failures_and_errors_are_read_from_the_junit_report_with_their_first_lines(tmp_path: Path) -> None:
    report = tmp_path / "round-2.xml"
    report.write_text(REPORT)
    failure, error = repeat.failures_in(report, 2, True)
    assert failure.test == "tests.operator.test_oncall::test_a_band" and failure.kind == "failure"
    # The message, blank lines left out, rather than the traceback.
    assert failure.lines == ["AssertionError: it ends before the approval", "assert 12.5 < 11.0", "more"]
    assert (failure.round, failure.loaded) == (2, True)
    # No message: the end of the traceback, where it was raised.
    assert error.test == "tests.e2e.test_calendar::test_holiday" and error.kind == "error"
    assert len(error.lines) == repeat.FIRST_LINES and error.lines[-1] == "E   TimeoutError: the stack did not come up"


def test_the_report_lists_each_test_once_with_every_round_it_failed_in_and_ends_with_the_counts() -> None:
    first = repeat.Failure("tests.e2e.test_a::test_x", 1, True, "failure", ["assert 1 == 2"])
    again = repeat.Failure("tests.e2e.test_a::test_x", 3, False, "error", ["TimeoutError"])
    other = repeat.Failure("tests.operator.test_b::test_y", 2, False, "failure", ["x" * 300])
    lines = repeat.summary([first, other, again], 3)
    assert lines[-1] == "test-repeat: rounds=3 failed_tests=2"
    assert lines[0] == "- tests.e2e.test_a::test_x: failed in round(s) 1 (hog), 3"
    assert "    round 1 failure:" in lines and "      assert 1 == 2" in lines
    assert "    round 3 error:" in lines and "      TimeoutError" in lines
    assert "- tests.operator.test_b::test_y: failed in round(s) 2" in lines
    assert "      " + "x" * 200 in lines, "a long line is cut"
    assert repeat.summary([], 4) == ["test-repeat: rounds=4 failed_tests=0"]


def test_the_hog_runs_n_busy_processes_and_stops_each_even_when_the_round_fails() -> None:
    with pytest.raises(RuntimeError, match="the round failed"), repeat.cpu_hog(2) as hogs:
        assert len(hogs) == 2 and all(hog.poll() is None for hog in hogs)
        held = list(hogs)
        raise RuntimeError("the round failed")
    assert all(hog.returncode is not None for hog in held), "every hog ended, by its own pid"
    with repeat.cpu_hog(0) as none:
        assert none == []


async def test_a_hog_ends_by_itself_when_the_process_that_started_it_dies() -> None:
    # The hog's parent here is a shell that exits at once: the hog, left alone, sees its parent
    # change and stops spinning (a SIGKILLed runner leaves no hog behind).
    parent = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        '"$PYTHON" -c "$HOG" $$ >/dev/null 2>&1 & echo $!',
        env={**os.environ, "HOG": repeat.HOG_CODE, "PYTHON": sys.executable},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(parent.communicate(), 30)
    assert parent.returncode == 0
    pid = int(out.decode().strip())

    def ended() -> bool:
        try:  # gone, or a zombie nobody has reaped yet: either way no longer spinning
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except FileNotFoundError:
            return True

    try:
        await eventually(ended, timeout=30, what=f"the orphaned hog {pid} to stop")
    finally:
        if not ended():
            os.kill(pid, signal.SIGKILL)


def test_the_clone_holds_the_committed_revision_and_its_tests_import_its_own_code(tmp_path: Path) -> None:
    commit = repeat.clone("HEAD", tmp_path / "repo")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert commit == head.stdout.strip()
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=tmp_path / "repo", capture_output=True, text=True, check=True
    )
    assert status.stdout == "", "a clean checkout of the commit"
    # This checkout's dependencies (an uncommitted change to them would ask for a venv of its own).
    (tmp_path / "repo" / "pyproject.toml").write_bytes((REPO_ROOT / "pyproject.toml").read_bytes())
    checkout = repeat.set_up(tmp_path / "repo", commit, fresh_venv=False)
    assert checkout.env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "repo" / "services")
    found = subprocess.run(
        [str(checkout.python), "-c", "import replenisher; print(replenisher.__file__)"],
        cwd=checkout.root,
        env=checkout.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(found.stdout.strip()).is_relative_to(tmp_path / "repo"), found.stdout
    with pytest.raises(SystemExit, match="no-such-revision"):
        repeat.clone("no-such-revision", tmp_path / "other")


def test_the_clones_code_comes_first_on_the_import_path() -> None:
    env = repeat.clone_env(Path("/tmp/clone"), {"PYTHONPATH": "/elsewhere", "HOME": "/home/x"})
    assert env["PYTHONPATH"] == os.pathsep.join(["/tmp/clone/services", "/elsewhere"]) and env["HOME"] == "/home/x"
    assert repeat.clone_env(Path("/tmp/clone"), {})["PYTHONPATH"] == "/tmp/clone/services"
