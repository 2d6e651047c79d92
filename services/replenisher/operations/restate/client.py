"""`RestateClient`: the one object the CLI and the console hold to read Restate and call the agents.

It only puts the jobs together (the two doors, the ingress with its outage handling, health,
paused calls, the agents' reads and the SQL read models) over one HTTP client and one clock,
so a use case takes one port. Errors come out as exceptions a person can act on: Restate is
not reachable, the service is down, the thing asked for does not exist, or Restate refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from replenisher.domain.sku import SkuRecord, SkuView
from replenisher.domain.state import State
from replenisher.operations.restate import agents, deployments, health, paused, read_models
from replenisher.operations.restate.deployments import InFlight, Registered
from replenisher.operations.restate.health import Health
from replenisher.operations.restate.http import RestateHttp
from replenisher.operations.restate.ingress import PATIENCE, Ingress
from replenisher.operations.restate.paused import PausedCall
from replenisher.operations.restate.read_models import RunView, SkuRecordPage
from replenisher.timeline.journal import JournalEntry, Row, TransientFailure
from replenisher.timeline.model import Decision, Invocation, Waiting


class RestateClient:
    def __init__(
        self,
        ingress_url: str,
        admin_url: str,
        client: httpx.AsyncClient | None = None,
        patience: float = PATIENCE,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.http = RestateHttp(ingress_url, admin_url, client)
        self.now = now
        self._ingress = Ingress(self.http, now, self.health, patience)

    @property
    def ingress_url(self) -> str:
        return self.http.ingress_url

    @property
    def admin_url(self) -> str:
        return self.http.admin_url

    @property
    def degraded(self) -> Health | None:
        """Set once a read found the service down and fell back to Restate's storage."""
        return self._ingress.degraded

    @degraded.setter
    def degraded(self, health: Health | None) -> None:
        self._ingress.degraded = health

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> RestateClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the doors and the service's health ---------------------------------------------

    async def ingress(self, method: str, path: str, body: Any = None, idempotency_key: str | None = None) -> Any:
        return await self._ingress.call(method, path, body, idempotency_key)

    async def send(self, path: str, body: Any, idempotency_key: str) -> str | None:
        return await self._ingress.send(path, body, idempotency_key)

    async def sql(self, query: str) -> list[Row]:
        return await self.http.sql(query)

    async def health(self, ours: tuple[str, float] | None = None) -> Health:
        return await health.health(self.http, self.now(), ours, self._deployment_silent)

    async def _deployment_silent(self) -> str | None:
        """Why the agents' deployment does not answer its health check, if it is on this machine."""
        return await health.deployment_silent(self.http)

    async def answered_since(self, at: float) -> bool:
        return await health.answered_since(self.http, at)

    async def answered_after(self, t: float) -> float | None:
        return await health.answered_after(self.http, t)

    async def paused(self, keys: list[str] | None = None) -> list[PausedCall]:
        return await paused.paused(self.http, keys)

    async def troubled(self, recent: paused.RecentPaused | None = None) -> paused.Troubled:
        """Every paused call (as `recent` last found them, when given) and every run retrying a step."""
        return await paused.troubled(self.http, await recent.ids(self.http) if recent is not None else None)

    async def paused_of(self, record: SkuRecord) -> list[PausedCall]:
        """The paused calls of a SKU's agent, its active run and its recent runs."""
        return await paused.paused(self.http, paused.paused_keys(record))

    # --- deployments ---------------------------------------------------------------------

    async def registered_deployments(self) -> list[Registered]:
        return await deployments.registered(self.http)

    async def in_flight(self, deployment_id: str | None = None) -> list[InFlight]:
        return await deployments.in_flight(self.http, deployment_id)

    async def remove_deployment(self, deployment_id: str) -> None:
        await deployments.remove(self.http, deployment_id)

    # --- the agents ----------------------------------------------------------------------

    async def sku_status(self, sku: str) -> SkuView:
        return await agents.sku_status(self._ingress, sku)

    async def run_view(self, run_id: str) -> RunView:
        return await agents.run_view(self._ingress, run_id)

    async def deliver(
        self, sku: str, event: str, payload: dict[str, Any], idempotency_key: str | None = None
    ) -> dict[str, Any]:
        return await agents.deliver(self._ingress, sku, event, payload, idempotency_key)

    async def stored_sku_record(self, sku: str) -> SkuRecord:
        return await read_models.stored_sku_record(self.http, sku)

    async def stored_run_view(self, run_id: str) -> RunView:
        return await read_models.stored_run_view(self.http, run_id)

    # --- the SQL read models --------------------------------------------------------------

    async def sku_records(self) -> list[SkuRecord]:
        return await read_models.sku_records(self.http)

    async def sku_records_page(self, search: str, descending: bool, limit: int, offset: int) -> SkuRecordPage:
        return await read_models.sku_records_page(self.http, search, descending, limit, offset)

    async def sku_records_of(self, skus: list[str]) -> list[SkuRecord]:
        return await read_models.sku_records_of(self.http, skus)

    async def waiting_runs(self) -> dict[str, Waiting]:
        return await read_models.waiting_runs(self.http)

    async def run_states(self, run_ids: list[str]) -> dict[str, State]:
        return await read_models.run_states(self.http, run_ids)

    async def waiting_since(self, invocation_ids: dict[str, str]) -> dict[str, float]:
        return await read_models.waiting_since(self.http, invocation_ids)

    async def run_invocations(self, run_ids: list[str]) -> dict[str, Invocation]:
        return await read_models.run_invocations(self.http, run_ids)

    async def journal(self, invocation_id: str) -> list[JournalEntry]:
        return await read_models.journal(self.http, invocation_id)

    async def failures(self, invocation_id: str) -> list[TransientFailure]:
        return await read_models.failures(self.http, invocation_id)

    async def sku_agent_failures(self, sku: str) -> list[TransientFailure]:
        return await read_models.sku_agent_failures(self.http, sku)

    async def approval_messages(self, run_id: str) -> list[Decision]:
        return await read_models.approval_messages(self.http, run_id)
