"""Running a bench module as people do (`python -m bench.X ...`), for the tests of its smoke plan."""

from __future__ import annotations

import re
import subprocess
import sys

from support import REPO_ROOT


def run_bench(module: str, *args: str, timeout: float = 240) -> list[str]:
    """The lines the bench printed; it must have ended well (else its stderr's end is the message)."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


def sizes_of(lines: list[str], size_line: re.Pattern[str]) -> list[int]:
    """The size each of the lines before the closing one reports (the pattern's first group)."""
    return [int(m.group(1)) for line in lines[:-1] if (m := size_line.match(line))]
