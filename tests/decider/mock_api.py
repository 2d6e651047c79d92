"""The real `anthropic` client over a mock transport that answers like the Messages API.

`anthropic` 2.x sends through `httpx2` (1.x and 0.x through `httpx`); both have the same
`MockTransport`, so the client, its request building, retries and error mapping are all real.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from anthropic_stand_in.scripted_model import ScriptedModel

try:
    import httpx2 as anthropic_http
except ImportError:  # pragma: no cover - anthropic before 2.0
    import httpx as anthropic_http  # type: ignore[no-redef]


class MockApi:
    """Scripted answers, and every request as the API would have received it."""

    def __init__(self, model: ScriptedModel | None = None) -> None:
        self.model = model or ScriptedModel()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def handle(self, request: Any) -> Any:
        assert request.method == "POST" and request.url.path == "/v1/messages", request.url
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        reply = self.model.respond(body)
        return anthropic_http.Response(reply.status, json=reply.body, headers=reply.headers)

    def client(self, max_retries: int = 0, timeout: float = 5.0) -> anthropic.AsyncAnthropic:
        http = anthropic_http.AsyncClient(transport=anthropic_http.MockTransport(self.handle))
        return anthropic.AsyncAnthropic(
            api_key="sk-ant-test",
            base_url="https://api.anthropic.test",
            max_retries=max_retries,
            timeout=timeout,
            http_client=http,
        )

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]
