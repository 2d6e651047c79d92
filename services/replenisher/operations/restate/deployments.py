"""Restate's records of its deployments: which are registered, what runs on each, and removing one.

- A deployment's id, endpoint, creation time and services come from `sys_deployment`; which one
  is the newest for each service (where new calls go) from `sys_service`.
- The code version it runs comes from Restate's record of its discovery: each service of ours
  names its REPLENISHER_CODE_VERSION in its metadata (`durable/app.py`), and Restate keeps that
  metadata with the deployment (`GET /deployments/{id}`). A deployment registered by code older
  than that says nothing there; the caller may then read the version its runs stamped on their
  turns.
- What is in flight on it: every invocation not completed whose `pinned_deployment_id` is it.
  An invocation Restate has not started yet (queued behind another call of the same key, or
  scheduled for later) is pinned to none: it goes to the newest deployment when it starts.
- Removing one: `DELETE /deployments/{id}?force=true`. Restate 1.7 implements only the forced
  removal (without `force` it answers 501), and it removes a deployment with invocations in flight
  all the same (they then fail, with nowhere to run): the caller must check first.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from replenisher.loop import names
from replenisher.operations.restate.errors import NotFound, Refused
from replenisher.operations.restate.http import RestateHttp, literal, message
from replenisher.timeline.journal import epoch


class Registered(BaseModel):
    """A deployment as Restate records it."""

    id: str
    endpoint: str
    created_at: float | None = None
    services: list[str] = Field(default_factory=list)
    newest_for: list[str] = Field(default_factory=list, description="the services whose new calls go to it")
    code_version: str | None = Field(default=None, description="as its services told Restate at discovery")
    settings: dict[str, str] | None = Field(
        default=None, description="the audited settings its services told Restate at discovery (config.AUDITED)"
    )


class InFlight(BaseModel):
    """An invocation not completed, and the deployment it is pinned to (None: not started yet)."""

    id: str
    target: str
    service: str
    key: str = ""
    status: str
    deployment_id: str | None = None


async def registered(http: RestateHttp) -> list[Registered]:
    """Every registered deployment, oldest first."""
    rows = await http.sql("SELECT id, endpoint, created_at, services FROM sys_deployment ORDER BY created_at")
    newest: dict[str, list[str]] = {}
    for row in await http.sql("SELECT name, deployment_id FROM sys_service ORDER BY name"):
        newest.setdefault(str(row["deployment_id"]), []).append(str(row["name"]))
    found = []
    for row in rows:
        deployment_id = str(row["id"])
        version, settings = await discovered(http, deployment_id)
        found.append(
            Registered(
                id=deployment_id,
                endpoint=str(row.get("endpoint") or ""),
                created_at=epoch(row.get("created_at")),
                services=sorted(str(s) for s in row.get("services") or []),
                newest_for=newest.get(deployment_id, []),
                code_version=version,
                settings=settings,
            )
        )
    return found


async def discovered(http: RestateHttp, deployment_id: str) -> tuple[str | None, dict[str, str] | None]:
    """The code version and the audited settings the deployment's services named at discovery, if
    they named them (code from before either says nothing)."""
    url = f"{http.admin_url}/deployments/{deployment_id}"
    response = await http.request("GET", url, "admin API", headers={"accept": "application/json"})
    if response.status_code == 404:
        return None, None  # removed since it was listed
    if response.is_error:
        raise Refused(response.status_code, f"reading deployment {deployment_id}: {message(response)}")
    metadata = [service.get("metadata") or {} for service in response.json().get("services", [])]
    versions = {str(v) for m in metadata if (v := m.get(names.CODE_VERSION_METADATA))}
    settings = None
    for m in metadata:
        try:
            said = json.loads(m.get(names.SETTINGS_METADATA) or "null")
        except ValueError:
            continue
        if isinstance(said, dict):
            settings = {str(k): str(v) for k, v in said.items()}
            break
    return ", ".join(sorted(versions)) or None, settings


async def in_flight(http: RestateHttp, deployment_id: str | None = None) -> list[InFlight]:
    """The invocations not completed, of every deployment (or of one), oldest first."""
    only = f"AND pinned_deployment_id = {literal(deployment_id)} " if deployment_id is not None else ""
    rows = await http.sql(
        "SELECT id, target, target_service_name, target_service_key, status, pinned_deployment_id "
        f"FROM sys_invocation WHERE status <> 'completed' {only}ORDER BY created_at"
    )
    return [
        InFlight(
            id=str(r["id"]),
            target=str(r["target"]),
            service=str(r["target_service_name"]),
            key=str(r.get("target_service_key") or ""),
            status=str(r["status"]),
            deployment_id=str(r["pinned_deployment_id"]) if r.get("pinned_deployment_id") else None,
        )
        for r in rows
    ]


async def remove(http: RestateHttp, deployment_id: str) -> None:
    """Remove a deployment from Restate (forced: the only removal Restate 1.7 implements)."""
    url = f"{http.admin_url}/deployments/{deployment_id}"
    response = await http.request("DELETE", url, "admin API", params={"force": "true"})
    if response.status_code == 404:
        raise NotFound(f"no deployment {deployment_id!r} is registered")
    if response.is_error:
        raise Refused(response.status_code, f"removing deployment {deployment_id}: {message(response)}")
