"""The manager's approval inbox over HTTP. Decisions come back as messages, not as answers."""

from __future__ import annotations

from replenisher.adapters.http import HttpEndpoint, check
from replenisher.domain.documents import ApprovalReminder, ApprovalRequest


class HttpManagerInbox(HttpEndpoint):
    async def request_approval(self, request: ApprovalRequest) -> None:
        # Posting the same request (same token) again is a no-op on the inbox's side.
        check(await self.post("manager", "approval-requests", body=request))

    async def remind(self, reminder: ApprovalReminder, key: str) -> None:
        # The key makes a retried reminder (a crash before its step was journaled) one reminder.
        headers = {"Idempotency-Key": key}
        check(
            await self.post(
                "manager", "approval-requests", reminder.po_number, "reminders", body=reminder, headers=headers
            )
        )
