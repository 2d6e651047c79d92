"""`make test` installs Debian's chromium when it is missing: scripts/apt-ensure, run for real.

The machine's own chromium stays where it is: each case runs the script with a PATH that holds
only stand-ins for `id`, `sudo` and `apt-get` (they record how they were called; `apt-get
install` "installs" the package by creating the checked file), so the script's choices as root,
as a user with sudo, and with neither are what is tested, not the package manager.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "apt-ensure"
BASH = shutil.which("bash") or "/bin/bash"
CHMOD = shutil.which("chmod") or "/bin/chmod"


class Machine:
    """A PATH of stand-ins, a log of their calls, and where the package lands once installed."""

    def __init__(self, root: Path, *, uid: int, sudo: bool = False, apt: bool = True, apt_fails: bool = False) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        self.calls = root / "calls.log"
        self.installed = root / "usr-bin" / "chromium"
        self.installed.parent.mkdir()
        os.symlink(shutil.which("env") or "/usr/bin/env", self.bin / "env")
        self._stub("id", f'[ "$1" = -u ] && echo {uid}')
        if sudo:
            self._stub("sudo", 'echo "sudo $*" >> "$CALLS"; SUDOED=1 "$@"')
        if apt:
            self._stub(
                "apt-get",
                'echo "apt-get $* as=${SUDOED:-direct} frontend=${DEBIAN_FRONTEND:-}" >> "$CALLS"\n'
                + ("exit 100\n" if apt_fails else "")
                + f'case " $* " in *" install "*) : > {self.installed}; {CHMOD} +x {self.installed};; esac',
            )

    def _stub(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!{BASH}\n{body}\n")
        path.chmod(0o755)

    def run(self) -> subprocess.CompletedProcess[str]:
        env = {"PATH": str(self.bin), "CALLS": str(self.calls)}
        return subprocess.run(
            [BASH, str(SCRIPT), "chromium", f"test -x {self.installed}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )

    def logged(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


def test_as_root_it_runs_apt_get_itself(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=0, sudo=True)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.logged() == [
        "apt-get update -qq as=direct frontend=noninteractive",
        "apt-get install -y -qq --no-install-recommends chromium as=direct frontend=noninteractive",
    ]
    assert "apt-get install -y chromium" in done.stderr
    assert machine.installed.exists()


def test_as_a_user_it_goes_through_sudo(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=1000, sudo=True)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.logged() == [
        "sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq",
        "apt-get update -qq as=1 frontend=noninteractive",
        "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium",
        "apt-get install -y -qq --no-install-recommends chromium as=1 frontend=noninteractive",
    ]
    assert "sudo apt-get install -y chromium" in done.stderr


def test_without_root_or_sudo_it_names_the_command_and_fails(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=1000, sudo=False)
    done = machine.run()
    assert done.returncode == 1
    assert machine.logged() == []
    assert "run `apt-get install -y chromium` as root" in done.stderr
    assert not machine.installed.exists()


def test_without_apt_get_it_says_so(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=0, apt=False)
    done = machine.run()
    assert done.returncode == 1
    assert "apt-get was not found" in done.stderr
    assert "sudo apt-get install -y chromium" in done.stderr


def test_a_failed_install_names_the_command_to_run(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=1000, sudo=True, apt_fails=True)
    done = machine.run()
    assert done.returncode == 1
    assert "installing chromium failed: run `sudo apt-get install -y chromium` yourself" in done.stderr


def test_present_it_calls_nothing(tmp_path: Path) -> None:
    machine = Machine(tmp_path, uid=0, sudo=True)
    machine.installed.write_text("")
    machine.installed.chmod(0o755)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.logged() == []
    assert done.stderr == ""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_installs_chromium_and_ci_relies_on_it() -> None:
    plan = subprocess.run(
        ["make", "-n", "test"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    ensure = plan.index("scripts/apt-ensure chromium 'test -x /usr/bin/chromium'")
    assert ensure < plan.index("pytest"), "chromium is installed before the tests run"
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "apt-get" not in ci, ".ci/run installs nothing itself: make test does, as for a user"
    assert "make test" in ci


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_deps_installs_a_missing_chromium_through_the_script(tmp_path: Path) -> None:
    # The Makefile's own target, run for real, with the stand-ins first on PATH and the browser
    # looked for where this test's apt-get "installs" it.
    machine = Machine(tmp_path, uid=1000, sudo=True)
    make = shutil.which("make")
    assert make is not None
    env = {"PATH": f"{machine.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}", "CALLS": str(machine.calls)}
    done = subprocess.run(
        [make, "-s", "test-deps", f"CHROMIUM={machine.installed}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert machine.installed.exists()
    assert [line.split(" as=")[0] for line in machine.logged() if line.startswith("apt-get")] == [
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends chromium",
    ]
    again = subprocess.run(
        [make, "-s", "test-deps", f"CHROMIUM={machine.installed}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0 and len(machine.logged()) == 4, "present: nothing installed twice"
