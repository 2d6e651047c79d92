"""Run test suites K times on a clean clone of a revision, optionally beside a CPU hog, and list
every test that failed at least once: its rounds, and the first lines of each failure.

    .venv/bin/python scripts/test_repeat.py --rounds 2 --hog 2 --hog-rounds alternate \\
        --suites tests/operator -- -n 2

`make test-repeat K=5 HOG=2` runs it. The revision (default HEAD: what is committed, not the
working tree) is cloned into a temporary directory and run there with this checkout's .venv,
its code put first on the import path (PYTHONPATH: the venv's editable install points at this
checkout) and checked to be the clone's before any round; when the revision's pyproject.toml
differs from this checkout's (other dependencies), or with --fresh-venv, the clone gets a venv
of its own (`make setup` there). Each round is its own pytest session with its own basetemp and
junit report under tests/artifacts/repeat/<started>-<pid>/ of this checkout (kept, so a failure can be read in
full). The hog is N spinning processes, started by this script and stopped by the pids it holds
whatever happens (a failed round, Ctrl-C, SIGTERM); each also ends by itself if this script
dies. The last line is `test-repeat: rounds=K failed_tests=F`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Literal

REPO = Path(__file__).resolve().parent.parent
SUITES = ("tests/e2e", "tests/operator")
OUT = REPO / "tests" / "artifacts" / "repeat"
FIRST_LINES = 6
# A busy loop that ends by itself once its parent (this script, whose pid it is given) is gone, so even
# a SIGKILL of the script leaves no hog spinning.
HOG_CODE = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    pass\n"
# Seconds an interrupted pytest has to stop its fixtures' processes before it is killed.
STOP_GRACE = 60.0
# The packages the clone must provide to its tests (services/ of the checkout).
PACKAGES = ("replenisher", "simulated_world", "anthropic_stand_in")
HogRounds = Literal["every", "alternate"]


@dataclass(frozen=True)
class Failure:
    test: str
    round: int
    loaded: bool
    kind: str  # failure or error
    lines: list[str]


@dataclass(frozen=True)
class Options:
    rounds: int
    hog: int
    hog_rounds: HogRounds
    rev: str
    suites: list[str]
    pytest_args: list[str]
    fresh_venv: bool
    keep_clone: bool

    def loaded(self, number: int) -> bool:
        """Whether round `number` (from 1) runs beside the hog: every round, or the odd ones."""
        return self.hog > 0 and (self.hog_rounds == "every" or number % 2 == 1)


def parse(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="test_repeat.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each a pytest session (default: %(default)s)")
    parser.add_argument("--hog", type=int, default=0, metavar="N", help="N busy processes beside the rounds")
    parser.add_argument(
        "--hog-rounds",
        choices=("every", "alternate"),
        default="every",
        help="the hog beside every round, or every other one, the first under it (default: %(default)s)",
    )
    parser.add_argument("--rev", default="HEAD", help="the revision cloned and tested (default: %(default)s)")
    parser.add_argument("--suites", nargs="+", default=list(SUITES), help="test paths (default: %(default)s)")
    parser.add_argument(
        "--fresh-venv", action="store_true", help="set the clone up with a venv of its own (make setup)"
    )
    parser.add_argument("--keep-clone", action="store_true", help="leave the clone in place afterwards")
    parser.add_argument("pytest_args", nargs="*", help="more pytest options, after --")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.hog < 0:
        parser.error("--hog must be 0 or more")
    return Options(
        rounds=args.rounds,
        hog=args.hog,
        hog_rounds=args.hog_rounds,
        rev=args.rev,
        suites=list(args.suites),
        pytest_args=list(args.pytest_args),
        fresh_venv=args.fresh_venv,
        keep_clone=args.keep_clone,
    )


@contextmanager
def cpu_hog(processes: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`processes` spinning processes while the block runs; each stopped by its own pid."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(processes):
            hogs.append(subprocess.Popen([sys.executable, "-c", HOG_CODE, str(os.getpid())], stdin=subprocess.DEVNULL))
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


def summary(failures: Sequence[Failure], rounds: int) -> list[str]:
    """Each test that failed at least once, with its rounds and first lines; the count line last."""
    by_test: dict[str, list[Failure]] = {}
    for failure in failures:
        by_test.setdefault(failure.test, []).append(failure)
    lines: list[str] = []
    for test, seen in sorted(by_test.items()):
        where = ", ".join(f"{f.round}{' (hog)' if f.loaded else ''}" for f in seen)
        lines.append(f"- {test}: failed in round(s) {where}")
        for failure in seen:
            lines.append(f"    round {failure.round} {failure.kind}:")
            lines.extend(f"      {line[:200]}" for line in failure.lines)
    lines.append(f"test-repeat: rounds={rounds} failed_tests={len(by_test)}")
    return lines


@dataclass(frozen=True)
class Checkout:
    """Where the rounds run: the clone, the python whose pytest runs them, and its environment."""

    root: Path
    commit: str
    python: Path
    env: dict[str, str]


def _git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"test-repeat: git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def clone(rev: str, into: Path) -> str:
    """A clean clone of this repository at `rev` (committed work only) in `into`; its commit."""
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    _git("clone", "--quiet", "--shared", "--no-checkout", str(REPO), str(into))
    _git("checkout", "--quiet", "--detach", commit, cwd=into)
    return commit


def clone_env(root: Path, base: Mapping[str, str]) -> dict[str, str]:
    """`base` with the clone's services/ first on the import path: a venv's editable install
    points at the checkout that made it, which PYTHONPATH comes before."""
    env = dict(base)
    paths = [str(root / "services"), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def set_up(root: Path, commit: str, fresh_venv: bool) -> Checkout:
    """The clone ready to test: this checkout's venv when the dependencies are the same (checked
    to import the clone's code), else a venv of its own made by `make setup` in the clone."""
    same_dependencies = (root / "pyproject.toml").read_bytes() == (REPO / "pyproject.toml").read_bytes()
    if fresh_venv or not same_dependencies:
        why = "asked for" if fresh_venv else "its pyproject.toml differs from this checkout's"
        print(f"== setting the clone up with a venv of its own ({why}): make setup", flush=True)
        subprocess.run(["make", "setup"], cwd=root, check=True, stdin=subprocess.DEVNULL, timeout=1800)
        return Checkout(root, commit, root / ".venv" / "bin" / "python", dict(os.environ))
    # This checkout's venv; the one running this script where the checkout has none (run from a
    # checkout's tests, e.g. inside another clone).
    own = REPO / ".venv" / "bin" / "python"
    python = own if own.exists() else Path(sys.executable)
    env = clone_env(root, os.environ)
    probe = "import importlib, sys\nfor name in sys.argv[1:]:\n    print(importlib.import_module(name).__file__)"
    done = subprocess.run([str(python), "-c", probe, *PACKAGES], cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"test-repeat: {python} cannot import the clone's code: {done.stderr.strip()[-2000:]}")
    outside = [path for path in done.stdout.split() if not Path(path).resolve().is_relative_to(root.resolve())]
    if outside:
        raise SystemExit(f"test-repeat: the clone's tests would import code from outside it: {outside}")
    return Checkout(root, commit, python, env)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_round(
    number: int, loaded: bool, checkout: Checkout, options: Options, out: Path
) -> tuple[int, list[Failure], float]:
    report = out / f"round-{number}.xml"
    basetemp = out / f"round-{number}"
    report.unlink(missing_ok=True)
    command = [
        str(checkout.python),
        "-m",
        "pytest",
        "-q",
        "-rf",
        "-p",
        "no:cacheprovider",
        f"--junitxml={report}",
        f"--basetemp={basetemp}",
        *options.suites,
        *options.pytest_args,
    ]
    beside = f" (beside {options.hog} busy process(es))" if loaded else ""
    print(f"== round {number}{beside}: {' '.join(command)}", flush=True)
    started = time.monotonic()
    with cpu_hog(options.hog if loaded else 0):
        # Its own process group, so a Ctrl-C at the terminal reaches this script only, which passes
        # one SIGINT on; SIGINT's default restored, since a shell's background job starts ignoring it.
        pytest = subprocess.Popen(
            command,
            cwd=checkout.root,
            env=checkout.env,
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=_default_sigint,
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


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(argv)
    # A directory per run: two runs at once (another revision, other suites) keep their reports apart.
    out = OUT / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    out.mkdir(parents=True)
    print(f"== reports and logs in {out}", flush=True)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    failures: list[Failure] = []
    done = 0
    where = Path(tempfile.mkdtemp(prefix="test-repeat-"))
    try:
        commit = clone(options.rev, where / "repo")
        print(f"== {options.rev} ({commit[:12]}) cloned into {where / 'repo'}", flush=True)
        checkout = set_up(where / "repo", commit, options.fresh_venv)
        for number in range(1, options.rounds + 1):
            loaded = options.loaded(number)
            code, found, elapsed = run_round(number, loaded, checkout, options, out)
            failures += found
            done += 1
            print(f"== round {number}: exit {code}, {len(found)} failed, {elapsed:.0f}s", flush=True)
    except KeyboardInterrupt:
        print(f"test-repeat: interrupted after {done} complete round(s)", file=sys.stderr)
        for line in summary(failures, done):
            print(line)
        return 130
    finally:
        if options.keep_clone:
            print(f"== the clone stays in {where / 'repo'}", flush=True)
        else:
            shutil.rmtree(where, ignore_errors=True)
    for line in summary(failures, done):
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
