"""Restate's two doors over HTTP: its ingress and its admin API (with the SQL introspection).

A transport error comes out as `Unreachable`, naming the door; the admin API's refusal of a
query as `Refused`, with Restate's message.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import ValidationError

from replenisher.domain.documents import SKU_ID
from replenisher.operations.restate.errors import NotFound, Refused, Unreachable
from replenisher.timeline.journal import Row

_TIMEOUT = httpx.Timeout(30.0, connect=3.0)


def valid_sku(sku: str) -> str:
    """A SKU as the documents define it; anything else never reaches a URL or a query."""
    try:
        return SKU_ID.validate_python(sku)
    except ValidationError:
        raise NotFound(f"{sku!r} is not a valid SKU (letters, digits, '.', '_' and '-')") from None


def literal(text: str) -> str:
    """A string as an SQL literal."""
    return "'" + text.replace("'", "''") + "'"


def among(values: list[str] | tuple[str, ...]) -> str:
    """Strings as an SQL list, for `IN`: `('SkuAgent', 'Replenish')`."""
    return "(" + ", ".join(literal(v) for v in values) + ")"


def message(response: httpx.Response) -> str:
    """What Restate said when it refused: its `message`, else the body, else the reason."""
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        return response.text.strip() or response.reason_phrase
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)


class RestateHttp:
    """One HTTP client for both doors (its own unless one is handed in)."""

    def __init__(self, ingress_url: str, admin_url: str, client: httpx.AsyncClient | None = None) -> None:
        self.ingress_url = ingress_url.rstrip("/")
        self.admin_url = admin_url.rstrip("/")
        self.client = client or httpx.AsyncClient(timeout=_TIMEOUT)
        self._owns_client = client is None

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    async def request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.client.request(method, url, **kwargs)
        except httpx.TransportError as e:
            base = "/".join(url.split("/", 3)[:3])
            raise Unreachable(
                f"Restate is unreachable: cannot reach its {what} at {base} ({type(e).__name__}); is the stack up?"
            ) from e

    async def sql(self, query: str) -> list[Row]:
        url = f"{self.admin_url}/query"
        headers = {"accept": "application/json"}
        response = await self.request("POST", url, "admin API", json={"query": query}, headers=headers)
        if response.is_error:
            raise Refused(response.status_code, f"query failed: {message(response)}")
        rows: list[Row] = response.json()["rows"]
        return rows

    async def kill(self, invocation_id: str) -> None:
        """Kill an invocation through the admin API."""
        await self.request("PATCH", f"{self.admin_url}/invocations/{invocation_id}/kill", "admin API")
