"""Thin helpers over the Restate admin API (restate-server 1.7): deployments and SQL.

`POST /deployments` with `force: true` overwrites a deployment registered under the same
URI; with `force: false` an identical re-registration is a no-op (HTTP 200) and a changed
one is refused (HTTP 409). A service restarted on the same URI with the same code needs no
re-registration at all: Restate keeps the deployment and reconnects on the next attempt.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from replenisher.stack import tls

# Discovery makes Restate call the service, which may take a moment on a cold process.
_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
_JSON = {"accept": "application/json", "content-type": "application/json"}


class AdminError(RuntimeError):
    """The admin API answered with an error."""


class Deployment(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    uri: str | None = None
    services: tuple[str, ...] = ()


def _same_uri(a: str, b: str) -> bool:
    # Restate stores URIs normalised with a trailing slash.
    return a.rstrip("/") == b.rstrip("/")


def _check(response: httpx.Response, what: str) -> Any:
    if response.is_error:
        try:
            message = response.json().get("message", response.text)
        except ValueError:
            message = response.text
        raise AdminError(f"{what} failed with HTTP {response.status_code}: {message}")
    return response.json()


def _deployment(body: dict[str, Any]) -> Deployment:
    return Deployment(
        id=body["id"],
        uri=body.get("uri"),
        services=tuple(sorted(s["name"] for s in body.get("services", []))),
    )


def _register_request(uri: str, force: bool) -> dict[str, Any]:
    return {"uri": uri, "force": force}


def _sql_rows(body: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = body["rows"]
    return rows


def is_healthy(admin_url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(f"{admin_url}/health", timeout=timeout, verify=tls.context()).status_code == 200
    except httpx.HTTPError:
        return False


def register_deployment(admin_url: str, uri: str, *, force: bool = True) -> Deployment:
    """Register (or with `force`, overwrite) the deployment served at `uri`."""
    response = httpx.post(
        f"{admin_url}/deployments", json=_register_request(uri, force), timeout=_TIMEOUT, verify=tls.context()
    )
    return _deployment(_check(response, f"registering deployment {uri}"))


def list_deployments(admin_url: str) -> list[Deployment]:
    response = httpx.get(f"{admin_url}/deployments", headers=_JSON, timeout=_TIMEOUT, verify=tls.context())
    return [_deployment(d) for d in _check(response, "listing deployments")["deployments"]]


def find_deployment(admin_url: str, uri: str) -> Deployment | None:
    return next((d for d in list_deployments(admin_url) if d.uri and _same_uri(d.uri, uri)), None)


def sql(admin_url: str, query: str) -> list[dict[str, Any]]:
    """Run SQL over Restate's introspection tables (sys_invocation, sys_journal, state, ...)."""
    response = httpx.post(
        f"{admin_url}/query", json={"query": query}, headers=_JSON, timeout=_TIMEOUT, verify=tls.context()
    )
    return _sql_rows(_check(response, f"query {query!r}"))


class Admin:
    """The admin API of one Restate runtime, with async twins for use inside async tests."""

    def __init__(self, admin_url: str) -> None:
        self.url = admin_url

    def sql(self, query: str) -> list[dict[str, Any]]:
        return sql(self.url, query)

    def register(self, uri: str, *, force: bool = True) -> Deployment:
        return register_deployment(self.url, uri, force=force)

    def deployments(self) -> list[Deployment]:
        return list_deployments(self.url)

    async def asql(self, query: str) -> list[dict[str, Any]]:
        async with httpx.AsyncClient(timeout=_TIMEOUT, verify=tls.context()) as client:
            response = await client.post(f"{self.url}/query", json={"query": query}, headers=_JSON)
        return _sql_rows(_check(response, f"query {query!r}"))

    async def aregister(self, uri: str, *, force: bool = True) -> Deployment:
        async with httpx.AsyncClient(timeout=_TIMEOUT, verify=tls.context()) as client:
            response = await client.post(f"{self.url}/deployments", json=_register_request(uri, force))
        return _deployment(_check(response, f"registering deployment {uri}"))
