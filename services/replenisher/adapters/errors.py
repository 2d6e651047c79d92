"""How the adapters fail, which is what the durable layer's retry policy keys on.

- `Rejected`: the other side answered with a 4xx that a retry will not change (bad
  request, unknown SKU or supplier, conflicting PO). The step should end at once.
- `UnexpectedResponse`: an answer outside the contract (a redirect, or a 2xx whose body is
  not the expected document). Retried like a transient fault, within the step's bounds.
- `Unavailable` (a 5xx, or a "try later" 4xx such as 429) and `Unreachable` (a timeout or a
  connection error): transient, retried by the caller. They are httpx's own `HTTPStatusError`
  and `TransportError`, with a text that names the party, the call and the answer: that text is
  what Restate records for a failed attempt, and what the console and timelines show.
"""

from __future__ import annotations

import httpx

from replenisher.domain.ports import Rejected

__all__ = ["Rejected", "Unavailable", "UnexpectedResponse", "Unreachable", "party_of"]


def party_of(path: str) -> str:
    """Who answers at a path of the world's layout: "supplier acme", "the ERP", "the manager's inbox"."""
    segments = [s for s in path.split("/") if s]
    if len(segments) >= 2 and segments[0] == "suppliers":
        return f"supplier {segments[1][:64]}"
    return {"erp": "the ERP", "manager": "the manager's inbox"}.get(segments[0] if segments else "", "the world")


class _Readable:
    """Restate records a failed attempt's `repr`: make it the sentence, not the constructor call."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}: {self}"


class Unavailable(_Readable, httpx.HTTPStatusError):
    """The other side answered, but with "not now" (5xx, 408, 425, 429): retried."""

    def __init__(self, response: httpx.Response, reason: str) -> None:
        request = response.request
        phrase = f" {response.reason_phrase}" if response.reason_phrase else ""
        text = (
            f"{party_of(request.url.path)} answered {response.status_code}{phrase} to "
            f"{request.method} {request.url.path[:120]}" + (f": {reason[:200]}" if reason else "")
        )
        super().__init__(text, request=request, response=response)


class Unreachable(_Readable, httpx.TransportError):
    """No answer at all: the connection failed or timed out. Retried."""

    def __init__(self, request: httpx.Request, cause: httpx.TransportError) -> None:
        why = str(cause) or "no detail"
        text = (
            f"{party_of(request.url.path)} could not be reached ({type(cause).__name__}: {why[:200]}) "
            f"at {request.method} {str(request.url)[:160]}"
        )
        super().__init__(text, request=request)


class UnexpectedResponse(_Readable, Exception):
    def __init__(self, status: int, url: str, detail: str) -> None:
        super().__init__(f"unexpected answer {status} from {party_of(httpx.URL(url).path)} ({url}): {detail}")
        self.status = status
        self.url = url
        self.detail = detail
