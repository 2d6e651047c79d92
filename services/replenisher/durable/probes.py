"""Test hooks for the crash matrix: kill or hold this process at a chosen step boundary, count decisions.

Both are off unless their environment variable names a file, as in production.

- `REPLENISHER_CRASH_POINTS`: a JSON-lines file of armed points, each
  `{"scope": "<run id or SKU>", "step": "<step name, or its first word>", "phase": "before" | "after"}`
  and optionally `"action": "hold"`. `before` fires inside the step before its side effect;
  `after` fires once the side effect happened but before the result is handed to Restate, so
  it is not journaled. A point fires once: it is recorded in `<file>.fired` first. Then the
  process SIGKILLs itself; or, for `hold`, the step waits there until the test appends the
  same line to `<file>.released` (at most `HOLD_LIMIT_SECONDS`), so the test can kill
  restate-server while the step is provably in flight.
- `REPLENISHER_DECISION_LOG`: every call of the decider appends `<run id> <turn>`, so a test
  can tell that no decision already journaled was taken again after a crash.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Literal

Phase = Literal["before", "after"]

HOLD_LIMIT_SECONDS = 120.0


def _file(var: str) -> Path | None:
    value = os.environ.get(var)
    return Path(value) if value else None


def _armed(scope: str, step: str, phase: Phase, action: str) -> tuple[Path, str] | None:
    """The armed file and the matching point's line, recorded as fired; None if none matches."""
    armed = _file("REPLENISHER_CRASH_POINTS")
    if armed is None or not armed.exists():
        return None
    fired_file = armed.with_name(armed.name + ".fired")
    fired = set(fired_file.read_text().splitlines()) if fired_file.exists() else set()
    for line in armed.read_text().splitlines():
        if not line.strip() or line in fired:
            continue
        point = json.loads(line)
        if (
            point["scope"] == scope
            and point["phase"] == phase
            and point.get("action", "kill") == action
            and point["step"] in (step, step.split(" ")[0])
        ):
            with fired_file.open("a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
            return armed, line
    return None


def crash_point(scope: str, step: str, phase: Phase) -> None:
    if _armed(scope, step, phase, "kill") is not None:
        # The whole server crashes, not one worker: under granian this process is a worker that
        # its supervisor would outlive. A managed process leads its own session, so its group is
        # exactly the server; a process started any other way kills only itself.
        if os.getpgid(0) == os.getsid(0):
            os.killpg(0, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


async def hold_point(scope: str, step: str, phase: Phase) -> None:
    found = _armed(scope, step, phase, "hold")
    if found is None:
        return
    armed, line = found
    released = armed.with_name(armed.name + ".released")
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while time.monotonic() < deadline:
        if released.exists() and line in released.read_text().splitlines():
            return
        await asyncio.sleep(0.05)


def record_decision(run_id: str, turn: int) -> None:
    log = _file("REPLENISHER_DECISION_LOG")
    if log is not None:
        with log.open("a") as f:
            f.write(f"{run_id} {turn}\n")
