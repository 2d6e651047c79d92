"""The names in the journals of a run and of its SKU: written by their handlers, read back by the timeline.

One module builds them and parses them, so the handlers that write a journal and the
timeline that reads it cannot drift. The formats are fixed: runs journaled by earlier code
replay against them, and the crash matrix arms points by these names (or their first word).

A run (`Replenish`, keyed by run id):

- `decide N`, then `decide N again K` for the K-th re-ask after a refusal: the decider's picks.
- `<tool> N`: the step of a call tool in turn N.
- `before <tool> N`: the durable delay some call tools wait before their step.
- `remind <approver> <point>%`, `escalate <tool>`: steps a wait takes while it waits.
- `<event>-<seq>`: the durable promise that holds the `seq`-th message of a kind.
- `state`, `waiting`: the run's state and its current wait, as the views read them.
- `archive`: the run's archive while it runs (`replenisher replay` reads it there until the
  run ends and hands it to its `RunArchive` object).
- `timestamp`: a clock reading no step's result carried (the SKU's handlers take them too).

Its SKU (`SkuAgent`, keyed by SKU):

- `read stock`: the ERP's stock level, as a check reads it.
- `run request`: a run's request, fixed before the run is started.
- `reconcile <PO>`: the supplier asked about an order a run left unresolved.
- `look up receipt <id>`: the ERP asked about the goods receipt a message claims.
- `record`: the SKU's record; `last_check_error`: why its last timed check could not read stock.
- `adopt`, `next check`: points in its handlers the crash matrix arms (no journal entry of their
  own): a found order's follow-up run being started, the next timed check being sent.

The objects themselves (`SkuAgent`, `Replenish`, `RunArchive`) and a call's target
(`<object>/<key>/<handler>`), as Restate's records name them: the operator's reads of those
records build their queries from these.
"""

from __future__ import annotations

import re
from typing import NamedTuple

STATE = "state"
WAITING = "waiting"
ARCHIVE = "archive"
TIMESTAMP = "timestamp"

READ_STOCK = "read stock"
RUN_REQUEST = "run request"
RECONCILE = "reconcile"
SKU_RECORD = "record"
LAST_CHECK_ERROR = "last_check_error"
ADOPT = "adopt"
NEXT_CHECK = "next check"

SKU_AGENT = "SkuAgent"
REPLENISH = "Replenish"
RUN_ARCHIVE = "RunArchive"
# The service's note that it answered an attempt after failed ones (durable/answered.py).
SERVICE_ANSWERED = "ServiceAnswered"
AFTER_FAILURES = "after_failures"
RUN = "run"  # the handler a run runs in
# The key of each service's metadata, given at discovery, that holds the code version
# (REPLENISHER_CODE_VERSION) of the deployment serving it: Restate keeps it per deployment.
CODE_VERSION_METADATA = "replenisher.code_version"
SETTINGS_METADATA = "replenisher.settings"
"""The audited settings a deployment runs with (`config.audited_settings`), as JSON in its discovery metadata."""

_STEP = re.compile(r"^(?P<tool>[a-z_]+) (?P<turn>\d+)$")
_DELAY = re.compile(r"^before (?P<tool>[a-z_]+) (?P<turn>\d+)$")
_DURING_WAIT = re.compile(r"^(?:remind \S+ \d+%|escalate [a-z_]+)$")
DECIDE = "decide"


class TurnStep(NamedTuple):
    tool: str
    turn: int


def decide(turn: int, attempt: int = 0) -> str:
    # The first ask keeps the name it always had, so runs journaled before re-asks existed replay.
    return f"{DECIDE} {turn}" if attempt == 0 else f"{DECIDE} {turn} again {attempt}"


def step(tool: str, turn: int) -> str:
    return f"{tool} {turn}"


def delay(tool: str, turn: int) -> str:
    return f"before {tool} {turn}"


def remind(approver: str, label: str) -> str:
    return f"remind {approver} {label}"


def escalate(tool: str) -> str:
    return f"escalate {tool}"


def reconcile(po_number: str) -> str:
    return f"{RECONCILE} {po_number}"


def receipt_lookup(receipt_id: str) -> str:
    return f"look up receipt {receipt_id}"


def standing(person: str) -> str:
    """The step that reads an approver's standing from the authority matrix, as their decision arrives."""
    return f"standing of {person}"


def target(service: str, key: str, handler: str) -> str:
    """A call's target as Restate records it: `Replenish/<run id>/run`."""
    return f"{service}/{key}/{handler}"


def promise_prefix(event: str) -> str:
    """What every promise name of a message kind starts with (`approval-`)."""
    return f"{event}-"


def message_promise(event: str, seq: int) -> str:
    return f"{promise_prefix(event)}{seq}"


def parse_step(name: str) -> TurnStep | None:
    """A turn's step or first decision (`tool` is then `decide`); None for any other name."""
    m = _STEP.match(name)
    return TurnStep(m["tool"], int(m["turn"])) if m else None


def decision_turn(name: str) -> int:
    """The turn a `decide N` or `decide N again K` name belongs to."""
    return int(name.split(" ")[1])


def parse_delay(name: str) -> TurnStep | None:
    m = _DELAY.match(name)
    return TurnStep(m["tool"], int(m["turn"])) if m else None


def is_during_wait(name: str) -> bool:
    """A step a wait took while it waited (a reminder, an escalation)."""
    return _DURING_WAIT.match(name) is not None


class PromiseName(NamedTuple):
    event: str
    seq: int


def parse_promise(key: str) -> PromiseName | None:
    """The message kind and number a promise name holds (`approval-3`); None for another name."""
    event, _, seq = key.rpartition("-")
    return PromiseName(event, int(seq)) if event and seq.isdigit() else None


def promise_event(key: str) -> str:
    """The message kind a promise name holds (`approval-3` -> `approval`)."""
    return key.rsplit("-", 1)[0]
