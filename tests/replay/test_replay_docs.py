"""The "Replaying runs" commands of the docs (docs/agent/replay.md), run as written: each exits 0
and shows what its comment names."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from support import REPO_ROOT, doc_section, sh_blocks

PAGE, SECTION = "agent/replay.md", "# Replaying runs"


def documented() -> list[tuple[str, str]]:
    block = sh_blocks(doc_section(PAGE, SECTION))[0]
    lines = [line for line in block.splitlines() if line.strip()]
    pairs = list(zip(lines[::2], lines[1::2], strict=True))
    assert pairs and all(says.startswith("#") for says, _ in pairs)
    return pairs


def test_the_documented_replay_commands_work_as_written() -> None:
    for says, command in documented():
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/replenisher", command
        done = subprocess.run(
            [sys.executable, "-m", "replenisher.cli", *argv[1:]],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr)
        for shown in re.findall(r"`([^`]+)`", says.split("shows", 1)[1]):
            assert shown in done.stdout, (command, shown, done.stdout[-500:])
