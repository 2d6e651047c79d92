"""`replenisher deployments` and the console's Deployments page: what runs on each deployment, and pruning.

Restate pins each invocation to the deployment it started on, so an old deployment must keep
serving until its last run ends, which for a replenishment can be weeks. This says, for each
registered deployment: the code version it runs, what is in flight on it (by kind: SkuAgent,
Replenish, AuditLog, RunArchive; and by what it waits for: the manager's approval, a supplier's
reply, the goods, or a paused, retrying, running or suspended call), whether it is drained, and
whether it is safe to remove: drained, and not the newest for any of its services (the newest
takes every new call, so removing it would leave them nowhere to go).

`prune` removes the safe ones. It checks each again just before removing it, since Restate's admin
API does not: it removes a deployment with runs in flight when asked (see `restate/deployments.py`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from replenisher.loop import names
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.deployments import InFlight, Registered
from replenisher.operations.restate.errors import NotFound, OperatorError
from replenisher.timeline.model import Waiting

DEPLOYMENT_ID = re.compile(r"^dp_[0-9A-Za-z]{1,64}$")
# What a run's current wait (`Replenish/<run>`, state `waiting`) waits for, by its event.
WAITS = {"approval": "approval", "supplier-reply": "supplier reply", "goods": "goods"}
# What an invocation does, by Restate's status, when no wait of a run says more.
STATUSES = {
    "paused": "paused (resumed only by a person)",
    "backing-off": "retrying",
    "running": "running",
    "suspended": "suspended (a timer or a call)",
}


class Call(BaseModel):
    """An invocation in flight on a deployment."""

    id: str
    target: str
    kind: str = Field(description="the service: SkuAgent, Replenish, AuditLog or RunArchive")
    status: str
    wait: str = Field(description="what it waits for: approval, supplier reply, goods, or what Restate says it does")


class DeploymentView(BaseModel):
    id: str
    endpoint: str
    created_at: float | None = None
    services: list[str] = Field(default_factory=list)
    newest_for: list[str] = Field(default_factory=list, description="the services whose new calls go to it")
    code_version: str | None = None
    code_version_from: Literal["discovery", "turns"] | None = Field(
        default=None,
        description="discovery: its services named it to Restate when registered; turns: stamped on the turns "
        "of its runs in flight (a deployment of code that did not name it at discovery)",
    )
    in_flight: list[Call] = Field(default_factory=list)
    by_kind: dict[str, int] = Field(default_factory=dict)
    by_wait: dict[str, int] = Field(default_factory=dict)
    drained: bool
    safe_to_remove: bool
    why: str = Field(description="why it is or is not safe to remove, in a line")


class Overview(BaseModel):
    deployments: list[DeploymentView]
    not_started: int = Field(
        default=0, description="invocations pinned to no deployment yet: they go to the newest when they start"
    )


class PruneResult(BaseModel):
    removed: list[str] = Field(default_factory=list)
    kept: dict[str, str] = Field(default_factory=dict, description="deployment id -> why it was not removed after all")


class NotSafe(OperatorError):
    """A deployment named for removal that is not safe to remove: nothing was removed."""


def wait_of(call: InFlight, waiting: dict[str, Waiting]) -> str:
    if call.status in ("paused", "backing-off"):
        return STATUSES[call.status]
    if call.service == names.REPLENISH and call.key in waiting:
        return WAITS.get(waiting[call.key].event, waiting[call.key].event)
    return STATUSES.get(call.status, call.status)


def verdict(newest_for: Sequence[str], calls: Sequence[Call]) -> tuple[bool, str]:
    if calls:
        n = len(calls)
        return False, f"not drained: {n} invocation{'s' * (n != 1)} in flight on it"
    if newest_for:
        return False, f"drained, but the newest for {', '.join(newest_for)}: new calls go to it"
    return True, "drained and superseded: safe to remove"


async def overview(client: RestateClient) -> Overview:
    registered = await client.registered_deployments()
    calls = await client.in_flight()
    waiting = await client.waiting_runs()
    views = []
    for d in registered:
        mine = [
            Call(id=c.id, target=c.target, kind=c.service, status=c.status, wait=wait_of(c, waiting))
            for c in calls
            if c.deployment_id == d.id
        ]
        version, source = await _code_version(client, d, mine)
        safe, why = verdict(d.newest_for, mine)
        views.append(
            DeploymentView(
                id=d.id,
                endpoint=d.endpoint,
                created_at=d.created_at,
                services=d.services,
                newest_for=d.newest_for,
                code_version=version,
                code_version_from=source,
                in_flight=mine,
                by_kind=dict(sorted(Counter(c.kind for c in mine).items())),
                by_wait=dict(sorted(Counter(c.wait for c in mine).items())),
                drained=not mine,
                safe_to_remove=safe,
                why=why,
            )
        )
    return Overview(deployments=views, not_started=sum(1 for c in calls if c.deployment_id is None))


async def _code_version(
    client: RestateClient, d: Registered, calls: Sequence[Call]
) -> tuple[str | None, Literal["discovery", "turns"] | None]:
    """What the deployment said at discovery; else the version its runs in flight stamped on their last turn."""
    if d.code_version is not None:
        return d.code_version, "discovery"
    runs = [c.target.split("/")[1] for c in calls if c.kind == names.REPLENISH]
    states = await client.run_states(runs) if runs else {}
    stamped = {s.history[-1].code for s in states.values() if s.history and s.history[-1].code}
    return (", ".join(sorted(stamped)), "turns") if stamped else (None, None)


def chosen(found: Overview, ids: Sequence[str]) -> list[DeploymentView]:
    """The deployments to remove: those named (each must be safe, else nothing is removed), or every safe one."""
    if not ids:
        return [d for d in found.deployments if d.safe_to_remove]
    by_id = {d.id: d for d in found.deployments}
    picked = []
    for deployment_id in dict.fromkeys(ids):
        if not DEPLOYMENT_ID.match(deployment_id):
            raise NotFound(f"{deployment_id!r} is not a deployment id (they read dp_ and letters and digits)")
        if deployment_id not in by_id:
            raise NotFound(f"no deployment {deployment_id} is registered (`replenisher deployments` lists them)")
        d = by_id[deployment_id]
        if not d.safe_to_remove:
            raise NotSafe(f"{deployment_id} is not safe to remove: {d.why}; nothing was removed")
        picked.append(d)
    return picked


async def prune(client: RestateClient, picked: Sequence[DeploymentView]) -> PruneResult:
    """Remove each, checking again just before that nothing is in flight on it and that it is not the
    newest for a service (Restate itself would remove it all the same)."""
    result = PruneResult()
    for d in picked:
        now = {r.id: r for r in await client.registered_deployments()}
        if d.id not in now:
            result.kept[d.id] = "already removed"
            continue
        calls = [
            Call(id=c.id, target=c.target, kind=c.service, status=c.status, wait=c.status)
            for c in await client.in_flight(d.id)
        ]
        safe, why = verdict(now[d.id].newest_for, calls)
        if not safe:
            result.kept[d.id] = why
            continue
        await client.remove_deployment(d.id)
        result.removed.append(d.id)
    return result
