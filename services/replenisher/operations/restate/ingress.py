"""Calling the agents' handlers over Restate's ingress, without hanging on a dead service.

When ingress has not answered within `patience`, Restate's own records say whether the
service is down. If it is, a read gives up at once (`ServiceDown`: the caller reads Restate's
storage instead) and is killed in Restate rather than left to run later; a write, which
Restate has accepted and will run when the service is back, says so with its invocation id
(`Accepted`). A write that waits behind a paused call of its SKU would wait for a person: it
says so too (`Blocked`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from replenisher.operations.restate.errors import NotFound, OperatorError, Refused
from replenisher.operations.restate.health import Health, ServiceDown
from replenisher.operations.restate.http import RestateHttp, literal, message
from replenisher.operations.restate.paused import Blocked, paused_holding
from replenisher.timeline.journal import sql_time

PATIENCE = 1.5  # seconds an ingress call may take before Restate is asked whether the service is down


class Accepted(OperatorError):
    """Restate accepted the call, and runs it when the service is back: not a failure."""

    def __init__(self, what: str, invocation_id: str | None, health: Health) -> None:
        ident = f" as invocation {invocation_id}" if invocation_id else ""
        since = health.dated()
        super().__init__(
            f"Restate accepted {what}{ident}; the replenisher service is down{since}, "
            "so it will run when the service is back"
        )
        self.what = what
        self.invocation_id = invocation_id
        self.health = health


def what(path: str) -> str:
    """`/SkuAgent/SKU-1/check` as people say it: `check` for SKU-1."""
    parts = path.strip("/").split("/")
    return f"`{parts[-1]}` for {parts[1]}" if len(parts) >= 3 else path


HealthCheck = Callable[[tuple[str, float] | None], Awaitable[Health]]
"""Whether the service is down, not counting a call of our own (its target and start)."""


class Ingress:
    """The agents' handlers over ingress. `degraded` is set once a call found the service down:
    later calls then do not wait for it again."""

    def __init__(
        self, http: RestateHttp, now: Callable[[], float], health: HealthCheck, patience: float = PATIENCE
    ) -> None:
        self.http = http
        self.now = now
        self.health = health
        self.patience = patience
        self.degraded: Health | None = None

    async def call(self, method: str, path: str, body: Any = None, idempotency_key: str | None = None) -> Any:
        """Call a handler. With an idempotency key the call is a write Restate keeps: if the
        service is down it raises `Accepted` (it will run later), else `ServiceDown`."""
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None or method == "POST":
            kwargs["json"] = body
        if self.degraded is not None:
            # Known down: do not leave one more call hanging in Restate for nothing.
            if idempotency_key is not None:
                raise await self._held(path, body, idempotency_key, self.degraded)
            raise ServiceDown(self.degraded)
        began = self.now()
        call = asyncio.ensure_future(self.http.request(method, f"{self.http.ingress_url}{path}", "ingress", **kwargs))
        try:
            done, _ = await asyncio.wait({call}, timeout=self.patience)
            if not done:
                # A call's own refused attempt says only that it was refused just now: left in,
                # each call would date the outage from itself (and a read count itself as held).
                ours = (path.strip("/"), began)
                found = await self._health_or_none(ours)
                if found is not None and found.service_down:
                    call.cancel()
                    self.degraded = found
                    if idempotency_key is not None:
                        raise await self._held(path, body, idempotency_key, found)
                    await self._drop_abandoned_read(path, began)
                    raise ServiceDown(found)
                # A change that waits behind a paused call of its SKU would wait for a person.
                if idempotency_key is not None and (holding := await paused_holding(self.http, path)) is not None:
                    call.cancel()
                    raise Blocked(what(path), await self._invocation_of(path, body, idempotency_key), holding)
            response = await call
        finally:
            if not call.done():
                call.cancel()
        if response.is_error:
            said = message(response)
            if response.status_code == 404:
                raise NotFound(said)
            raise Refused(response.status_code, said)
        return response.json() if response.content else None

    async def send(self, path: str, body: Any, idempotency_key: str) -> str | None:
        """Hand a call to Restate without waiting for it to run: its invocation id."""
        answer = await self.http.request(
            "POST",
            f"{self.http.ingress_url}{path}/send",
            "ingress",
            json=body,
            headers={"idempotency-key": idempotency_key},
        )
        if answer.is_error:
            raise Refused(answer.status_code, message(answer))
        ident = answer.json().get("invocationId") if answer.content else None
        return str(ident) if ident else None

    async def _health_or_none(self, ours: tuple[str, float]) -> Health | None:
        try:
            return await self.health(ours)
        except OperatorError:
            return None

    async def _drop_abandoned_read(self, path: str, since: float) -> None:
        """A read nobody waits for any more would otherwise run when the service is back, and
        pile up in Restate meanwhile: kill it (a read changes nothing, so nothing is lost)."""
        target = path.strip("/")
        try:
            rows = await self.http.sql(
                f"SELECT id FROM sys_invocation WHERE target = {literal(target)} AND status = 'backing-off' "
                f"AND created_at >= TIMESTAMP {literal(sql_time(since - 1))}"
            )
            for row in rows:
                await self.http.kill(str(row["id"]))
        except OperatorError:
            pass  # best effort: the read is harmless if it runs later

    async def _held(self, path: str, body: Any, idempotency_key: str, health: Health) -> Accepted | Blocked:
        """What a change Restate keeps while the service is down waits for: the service, or,
        when a paused call holds its SKU, a person resuming that call (the service coming back
        does not run it then)."""
        invocation = await self._invocation_of(path, body, idempotency_key)
        if (holding := await paused_holding(self.http, path)) is not None:
            return Blocked(what(path), invocation, holding)
        return Accepted(what(path), invocation, health)

    async def _invocation_of(self, path: str, body: Any, idempotency_key: str) -> str | None:
        # The same key attaches to the call Restate already holds: its id, and no second call.
        try:
            return await self.send(path, body, idempotency_key)
        except OperatorError:
            return None
