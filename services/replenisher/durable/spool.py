"""Model calls written down outside the journal, so a crash cannot hide one from the ledger.

A journaled step that calls the model runs again from the start when the process dies after
the API answered but before Restate journaled the answer: the first call was billed, and
its answer is gone with the process. Before each call the step appends `started` to a file
named for the invocation and the step, and `answered` with the usage once the API answered
(`failed` when the API answered with an error, which is not billed). When the step runs
again it reads what the earlier attempts left: each answered call is charged with its own
usage; a call with no outcome (the process died in it, or the connection broke) may have
been billed and cannot be priced, and the ledger says so (`unpriced`). Once the answer is
journaled, the file is removed.

It guards against the process dying, not the host: a line written reaches the kernel and outlives
the process, so it is not fsynced. An fsync would block the event loop, and every run the
process serves, twice per model call, for a guarantee the default directory (the system's
temporary one) does not keep across a reboot anyway.

The spool is a local directory: a step retried on another host (a cluster node, another
Lambda container) does not see it, and a call lost there is neither charged nor counted.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from replenisher.domain.costs import TokenUsage
from replenisher.domain.decisions import Decision, LostCall


class CallSpool:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or Path(tempfile.gettempdir()) / "replenisher-model-calls"

    def _file(self, invocation: str, step: str) -> Path:
        return self.directory / hashlib.sha256(f"{invocation}\n{step}".encode()).hexdigest()[:40]

    def _append(self, invocation: str, step: str, entry: dict[str, object]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._file(invocation, step).open("a") as f:
            f.write(json.dumps(entry) + "\n")

    def lost(self, invocation: str, step: str) -> list[LostCall]:
        """The calls earlier attempts of this step made whose answers never reached the journal."""
        path = self._file(invocation, step)
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            return []
        calls: dict[str, LostCall | None] = {}
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by the crash: the call it began is still counted below
            call = str(entry.get("call"))
            match entry.get("event"):
                case "started":
                    calls.setdefault(call, LostCall())
                case "answered":
                    usage = TokenUsage.model_validate(entry.get("usage") or {})
                    calls[call] = LostCall(usage=usage, usd=float(entry.get("usd", 0.0)))
                case "failed":
                    calls[call] = None
        return [c for c in calls.values() if c is not None]

    def started(self, invocation: str, step: str, call: str) -> None:
        self._append(invocation, step, {"event": "started", "call": call})

    def answered(self, invocation: str, step: str, call: str, decision: Decision) -> None:
        usage = decision.usage.model_dump() if decision.usage is not None else {}
        self._append(invocation, step, {"event": "answered", "call": call, "usage": usage, "usd": decision.usd})

    def failed(self, invocation: str, step: str, call: str) -> None:
        self._append(invocation, step, {"event": "failed", "call": call})

    def done(self, invocation: str, step: str) -> None:
        self._file(invocation, step).unlink(missing_ok=True)
