"""Reminders before an approval lapses, and a backup approver before the run gives up.

The company's policy, fixed into each run at its start (like its wait lengths): at each
reminder point (a fraction of the approval window, counted in business days) the approver
is reminded once; when the window lapses, the request goes to the backup approver with a
fresh window and a fresh one-time token for the same PO, and the first token is void.
Only when that window lapses too does the run fail closed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

PRIMARY_APPROVER = "manager"
ASKED_SEPARATOR = ", "
"""A request asking several people names them in its `approver` as `"cy, dee"`."""


def approver_of(people: tuple[str, ...] | list[str]) -> str:
    """The `approver` a request asking `people` carries (the manager's channel when it names no one)."""
    return ASKED_SEPARATOR.join(people) or PRIMARY_APPROVER


def asked_in(approver: str) -> list[str]:
    """The people an `approver` names, one by one."""
    return approver.split(ASKED_SEPARATOR)


class ApprovalPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reminders: tuple[float, ...] = Field(
        default=(0.5, 0.9), description="points of the approval window to remind at, as fractions of it"
    )
    backup_approver: str | None = Field(
        default="backup-approver", min_length=1, max_length=200, description="who is asked when the window lapses"
    )

    @field_validator("reminders")
    @classmethod
    def _inside_the_window(cls, points: tuple[float, ...]) -> tuple[float, ...]:
        for point in points:
            if not 0 < point < 1:
                raise ValueError(f"a reminder point is a fraction of the window between 0 and 1, not {point:g}")
        return tuple(sorted(set(points)))

    @classmethod
    def none(cls) -> ApprovalPolicy:
        """No reminders, no backup: how runs behaved before this policy existed."""
        return cls(reminders=(), backup_approver=None)


class Reminder(BaseModel):
    """One reminder of the current approval request, due at wall instant `at`."""

    model_config = ConfigDict(frozen=True)

    point: float
    at: float
    approver: str
    po_number: str

    @property
    def label(self) -> str:
        return f"{round(self.point * 100)}%"

    @property
    def key(self) -> str:
        """The idempotency key: one reminder per approver, PO and point, however often it is retried."""
        # A request asking two people names them "a, b": the key keeps to header-friendly characters.
        return f"{self.po_number}-{'+'.join(asked_in(self.approver))}-remind-{self.label}"


class ReminderSent(BaseModel):
    point: float
    at: float
    delivered: bool = True
    error: str | None = None
