"""Run the e2e and operator suites K times, optionally beside a CPU hog, and list every test
that failed at least once: which rounds, and the first lines of each failure.

    .venv/bin/python scripts/test_repeat.py --rounds 5 --hog every -- -x

`make test-repeat K=5 HOG=1` runs it. Each round is a separate pytest session with its own
basetemp and junit report under tests/artifacts/repeat/ (kept, so a failure can be read in
full). The hog is one spinning process per core, started by this script and stopped by the
pids it holds, whatever happens (a failed round, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parent.parent
SUITES = ("tests/e2e", "tests/operator")
OUT = REPO / "tests" / "artifacts" / "repeat"
FIRST_LINES = 6
HOG_CODE = "while True: pass"
# Seconds an interrupted pytest has to stop its fixtures' processes before it is killed.
STOP_GRACE = 60.0


@dataclass
class Failure:
    test: str
    round: int
    loaded: bool
    kind: str  # failure or error
    lines: list[str]


@contextmanager
def cpu_hog(on: bool) -> Iterator[list[subprocess.Popen[bytes]]]:
    """One spinning process per core while the block runs; each stopped by its own pid."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        if on:
            for _ in range(os.cpu_count() or 1):
                hogs.append(subprocess.Popen([sys.executable, "-c", HOG_CODE], stdin=subprocess.DEVNULL))
        yield hogs
    finally:
        for hog in hogs:
            if hog.poll() is None:
                hog.kill()
        for hog in hogs:
            hog.wait(timeout=10)


def failures_in(report: Path, round_number: int, loaded: bool) -> list[Failure]:
    found: list[Failure] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            element = case.find(kind)
            if element is None:
                continue
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            text = element.get("message") or ""
            detail = (element.text or "").strip().splitlines()
            # The message first (the assertion), then the end of the traceback (where it was raised).
            lines = [line for line in text.splitlines() if line.strip()][:FIRST_LINES] or detail[-FIRST_LINES:]
            found.append(Failure(name, round_number, loaded, kind, lines))
    return found


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_round(
    number: int, loaded: bool, suites: Sequence[str], pytest_args: Sequence[str]
) -> tuple[int, list[Failure], float]:
    report = OUT / f"round-{number}.xml"
    basetemp = OUT / f"round-{number}"
    report.unlink(missing_ok=True)
    command = [
        str(REPO / ".venv" / "bin" / "pytest"),
        "-q",
        "-rf",
        "-p",
        "no:cacheprovider",
        f"--junitxml={report}",
        f"--basetemp={basetemp}",
        *suites,
        *pytest_args,
    ]
    print(f"== round {number}{' (under a CPU hog)' if loaded else ''}: {' '.join(command)}", flush=True)
    started = time.monotonic()
    with cpu_hog(loaded):
        # Its own process group, so a Ctrl-C at the terminal reaches this script only, which passes
        # one SIGINT on; SIGINT's default restored, since a shell's background job starts ignoring it.
        pytest = subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.DEVNULL, process_group=0, preexec_fn=_default_sigint
        )
        try:
            code = pytest.wait()
        except BaseException:
            # Interrupted: pytest (and its xdist workers, in the group it leads) stops the way
            # Ctrl-C stops it, so its fixtures stop the processes they started; killed only if it
            # has not ended after that.
            _signal_group(pytest, signal.SIGINT)
            try:
                pytest.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(pytest, signal.SIGKILL)
                pytest.wait()
            raise
    elapsed = time.monotonic() - started
    if not report.exists():
        lost = Failure("(the whole round)", number, loaded, "error", [f"pytest exited {code} without a report"])
        return code, [lost], elapsed
    return code, failures_in(report, number, loaded), elapsed


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Signals the process group the round's pytest leads (its own, from process_group=0)."""
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass  # the whole group has ended already


def summary(failures: list[Failure], rounds: int) -> list[str]:
    if not failures:
        return [f"test-repeat: no failure in {rounds} round(s)"]
    by_test: dict[str, list[Failure]] = {}
    for failure in failures:
        by_test.setdefault(failure.test, []).append(failure)
    lines = [f"test-repeat: {len(by_test)} test(s) failed at least once in {rounds} round(s)"]
    for test, seen in sorted(by_test.items()):
        where = ", ".join(f"{f.round}{' (hog)' if f.loaded else ''}" for f in seen)
        lines.append(f"- {test}: failed in round(s) {where}")
        for failure in seen:
            lines.append(f"    round {failure.round} {failure.kind}:")
            lines.extend(f"      {line[:200]}" for line in failure.lines)
    return lines


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("K", "5")))
    parser.add_argument(
        "--hog",
        choices=("none", "every", "alternate"),
        default="none",
        help="a CPU hog beside no round, every round, or every other round (the first under it)",
    )
    parser.add_argument("--suites", nargs="+", default=list(SUITES), help="test paths (default: %(default)s)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest options, after --")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    OUT.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    failures: list[Failure] = []
    done = 0
    try:
        for number in range(1, args.rounds + 1):
            loaded = args.hog == "every" or (args.hog == "alternate" and number % 2 == 1)
            code, found, elapsed = run_round(number, loaded, args.suites, args.pytest_args)
            failures += found
            done += 1
            print(f"== round {number}: exit {code}, {len(found)} failed, {elapsed:.0f}s", flush=True)
    except KeyboardInterrupt:
        print(f"test-repeat: interrupted after {done} complete round(s)", file=sys.stderr)
        for line in summary(failures, done):
            print(line)
        return 130
    for line in summary(failures, done):
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
