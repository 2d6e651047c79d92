"""Test hooks for the crash matrix: kill this process at a chosen step boundary, count decisions.

Both are off unless their environment variable names a file, as in production.

- `REPLENISHER_CRASH_POINTS`: a JSON-lines file of armed points, each
  `{"scope": "<run id or SKU>", "step": "<step name, or its first word>", "phase": "before" | "after"}`.
  `before` fires inside the step before its side effect; `after` fires once the side effect
  happened but before the result is handed to Restate, so it is not journaled. A point
  fires once: it is recorded in `<file>.fired` before the process SIGKILLs itself.
- `REPLENISHER_DECISION_LOG`: every call of the decider appends `<run id> <turn>`, so a test
  can tell that no decision already journaled was taken again after a crash.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Literal

Phase = Literal["before", "after"]


def _file(var: str) -> Path | None:
    value = os.environ.get(var)
    return Path(value) if value else None


def crash_point(scope: str, step: str, phase: Phase) -> None:
    armed = _file("REPLENISHER_CRASH_POINTS")
    if armed is None or not armed.exists():
        return
    fired_file = armed.with_name(armed.name + ".fired")
    fired = set(fired_file.read_text().splitlines()) if fired_file.exists() else set()
    for line in armed.read_text().splitlines():
        if not line.strip() or line in fired:
            continue
        point = json.loads(line)
        if point["scope"] == scope and point["phase"] == phase and point["step"] in (step, step.split(" ")[0]):
            with fired_file.open("a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.kill(os.getpid(), signal.SIGKILL)


def record_decision(run_id: str, turn: int) -> None:
    log = _file("REPLENISHER_DECISION_LOG")
    if log is not None:
        with log.open("a") as f:
            f.write(f"{run_id} {turn}\n")
