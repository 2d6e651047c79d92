"""Rows of Restate's SQL introspection (1.7), typed: sys_invocation, sys_journal, sys_journal_events.

Restate answers `/query` with JSON rows whose timestamps are RFC 3339 strings and whose
journal entries carry a small JSON description (`entry_lite_json`) with completion ids,
promise keys and timer wake-up times. Nothing here does I/O.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from replenisher.timeline.model import Invocation

Row = dict[str, Any]


def epoch(value: Any) -> float | None:
    """An SQL timestamp as epoch seconds (Restate writes them like 2026-01-02T03:04:05.678Z)."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def sql_time(t: float) -> str:
    """Epoch seconds as an SQL timestamp literal Restate's DataFusion accepts."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JournalEntry(BaseModel):
    index: int
    entry_type: str
    name: str = ""
    at: float
    detail: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_command(self) -> bool:
        """Commands are proposed by the service itself: one proves the service was running then."""
        return self.entry_type.startswith("Command:")

    @property
    def kind(self) -> str:
        """`Run`, `Sleep`, `GetPromise`, ... without the Command:/Notification: prefix."""
        return self.entry_type.split(":", 1)[-1].strip()

    def _body(self) -> dict[str, Any]:
        command = self.detail.get("Command")
        if isinstance(command, dict) and len(command) == 1:
            body = next(iter(command.values()))
            return body if isinstance(body, dict) else {}
        return {}

    @property
    def completion_id(self) -> int | None:
        if self.is_command:
            value = self._body().get("completion_id")
            return int(value) if isinstance(value, int) else None
        ident = self.detail.get("Notification", {}).get("id", {})
        value = ident.get("CompletionId") if isinstance(ident, dict) else None
        return int(value) if isinstance(value, int) else None

    @property
    def result(self) -> str | None:
        """A notification's result: Success, Failure, Void, ..."""
        value = self.detail.get("Notification", {}).get("result")
        return value if isinstance(value, str) else None

    @property
    def promise_key(self) -> str | None:
        value = self._body().get("key")
        return value if isinstance(value, str) and self.kind in ("GetPromise", "PeekPromise") else None

    @property
    def wake_up_at(self) -> float | None:
        value = self._body().get("wake_up_time")
        return value / 1000 if isinstance(value, int | float) else None


class TransientFailure(BaseModel):
    """A failed attempt Restate recorded (it records an error again only when it changes)."""

    after_index: int
    at: float
    message: str
    code: str | None = None
    command: str | None = Field(default=None, description="the journaled step it happened in, if any")
    details: str | None = Field(default=None, description="the error in full, with its traceback")


_STATUS_PREFIX = re.compile(r"^\[\d{3} [A-Za-z ]+\]\s*")
_MORE_INFO = re.compile(r"(\\n|\n)For more information check: \S+?(?=\"\)|$)")


def error_text(message: Any) -> str:
    """An error in one line: without Restate's `[500 Internal]`, the traceback that follows,
    or the 'For more information check: <url>' line httpx appends (also inside a repr)."""
    text = _STATUS_PREFIX.sub("", str(message or "unknown error").strip())
    text = _MORE_INFO.sub("", text)
    return text.split("\n", 1)[0].rstrip() or "unknown error"


def error_details(message: Any, stacktrace: Any = None) -> str | None:
    """The whole error, traceback included, when there is more of it than its one line."""
    parts = [_STATUS_PREFIX.sub("", str(message or "").strip()), str(stacktrace or "").strip()]
    text = "\n".join(p for p in parts if p)
    return text if text and text.strip() != error_text(message) else None


def journal_entries(rows: list[Row]) -> list[JournalEntry]:
    entries = []
    for row in rows:
        at = epoch(row.get("appended_at"))
        if at is None:
            continue
        try:
            detail = json.loads(row.get("entry_lite_json") or "{}")
        except json.JSONDecodeError:
            detail = {}
        entries.append(
            JournalEntry(
                index=int(row["index"]),
                entry_type=str(row.get("entry_type") or ""),
                name=str(row.get("name") or ""),
                at=at,
                detail=detail if isinstance(detail, dict) else {},
            )
        )
    return sorted(entries, key=lambda e: e.index)


def transient_failures(rows: list[Row]) -> list[TransientFailure]:
    failures = []
    for row in rows:
        if row.get("event_type") != "TransientError":
            continue
        try:
            event = json.loads(row.get("event_json") or "{}")
        except json.JSONDecodeError:
            event = {}
        at = epoch(row.get("appended_at"))
        if at is None:
            continue
        failures.append(
            TransientFailure(
                after_index=int(row.get("after_journal_entry_index") or 0),
                at=at,
                message=error_text(event.get("error_message")),
                code=event.get("restate_doc_error_code"),
                command=event.get("related_command_name") or None,
                details=error_details(event.get("error_message"), event.get("error_stacktrace")),
            )
        )
    return sorted(failures, key=lambda f: f.at)


def invocation(row: Row) -> Invocation:
    retry = row.get("retry_count")
    failure = row.get("last_failure")
    return Invocation(
        id=str(row["id"]),
        status=str(row.get("status") or "unknown"),
        created_at=epoch(row.get("created_at")),
        completed_at=epoch(row.get("completed_at")),
        retry_count=int(retry) if retry is not None else None,
        last_failure=error_text(failure) if failure else None,
        last_failure_details=error_details(failure) if failure else None,
        last_failure_code=row.get("last_failure_error_code") or None,
        last_failure_command=row.get("last_failure_related_command_name") or None,
        last_start_at=epoch(row.get("last_start_at")),
        next_retry_at=epoch(row.get("next_retry_at")),
    )
