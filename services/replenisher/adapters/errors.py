"""How the adapters fail, which is what the durable layer's retry policy keys on.

- `Rejected`: the other side answered with a 4xx that a retry will not change (bad
  request, unknown SKU or supplier, conflicting PO). The step should end at once.
- `UnexpectedResponse`: an answer outside the contract (a redirect, or a 2xx whose body is
  not the expected document). Retried like a transient fault, within the step's bounds.
- Anything else is an httpx exception (timeouts, connection errors, `HTTPStatusError` for
  5xx and for "try later" 4xx such as 429): transient, retried by the caller.
"""

from __future__ import annotations

from replenisher.domain.ports import Rejected

__all__ = ["Rejected", "UnexpectedResponse"]


class UnexpectedResponse(Exception):
    def __init__(self, status: int, url: str, detail: str) -> None:
        super().__init__(f"unexpected answer {status} from {url}: {detail}")
        self.status = status
        self.url = url
        self.detail = detail
