"""The Claude decider and reader: the adapter between the harness and the Messages API.

`ClaudeDecider.decide` runs inside a journaled step (`ctx.run`), so a decision is made once
and replayed from the journal after a crash. Errors split two ways:
- busy or unreachable (429, 529 and other 5xx, 408, 409, timeouts, connection errors):
  raised as `ModelBusy`, so the step is retried with backoff (a bounded number of times);
- refused for good (400, 401, 403, 404, 413, 422, ...): raised as `Rejected`, which ends the
  step at once; the rules then take the turn.
The client's own retries are bounded by configuration (`max_retries`), and so are the step's.

`ClaudeReplyReader.read` is the tool-less extraction step: the model sees the email only as an
untrusted block, may answer only with text, and the answer is validated field by field
(`domain.extraction.facts_from_model_text`). If the call fails or the answer is unusable, the
offline pattern reader's facts are used instead, with a note.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

import anthropic

from replenisher.deciders.choice import decision_from_message, text_of, usage_of
from replenisher.deciders.prompt import decision_request, extraction_request
from replenisher.domain.costs import ModelPrice, price_of
from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.extraction import OfflineReplyReader, facts_from_model_text
from replenisher.domain.ports import Rejected
from replenisher.domain.state import ReplyFacts, State
from replenisher.domain.tools import Tool

TRANSIENT_STATUS = frozenset({408, 409, 429})


class ModelBusy(Exception):
    """The API is rate-limited, overloaded or unreachable: worth retrying later."""


def is_transient(error: anthropic.APIError) -> bool:
    if isinstance(error, anthropic.APIConnectionError):  # includes timeouts
        return True
    status = getattr(error, "status_code", None)
    return status is None or status in TRANSIENT_STATUS or status >= 500


def describe(error: anthropic.APIError) -> str:
    status = getattr(error, "status_code", None)
    body = getattr(error, "body", None)
    kind = body.get("error", {}).get("type") if isinstance(body, dict) else None
    return f"{status or type(error).__name__} {kind or ''}: {error.message}"[:300].strip()


def make_client(
    api_key: str, base_url: str | None = None, max_retries: int = 2, timeout_seconds: float = 60.0, **kwargs: Any
) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout_seconds, **kwargs
    )


def _nonce() -> str:
    return secrets.token_hex(6)


class ClaudeDecider:
    name = "claude"

    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        model: str,
        *,
        max_tokens: int = 1024,
        price: ModelPrice | None = None,
        nonce: Callable[[], str] = _nonce,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.price = price_of(model, price)
        self.nonce = nonce
        self.clock = clock

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision:
        request = decision_request(
            goal,
            state,
            allowed,
            refusals,
            model=self.model,
            max_tokens=self.max_tokens,
            nonce=self.nonce(),
            now=self.clock(),
        )
        try:
            message = await self.client.messages.create(**request)
        except anthropic.APIError as e:
            if is_transient(e):
                raise ModelBusy(f"model call failed, will retry: {describe(e)}") from e
            raise Rejected(getattr(e, "status_code", 400) or 400, f"model call refused: {describe(e)}") from e
        return decision_from_message(message.model_dump(mode="json"), self.price, decider=self.name)


class ClaudeReplyReader:
    """Reads a supplier's email with a tool-less model call; the patterns stand in when it cannot."""

    name = "claude"

    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        model: str,
        *,
        max_tokens: int = 400,
        price: ModelPrice | None = None,
        budget_usd: float | None = None,
        nonce: Callable[[], str] = _nonce,
    ) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.price = price_of(model, price)
        self.budget_usd = budget_usd
        self.nonce = nonce
        self.offline = OfflineReplyReader()

    async def read(self, state: State, received_at: float) -> ReplyFacts:
        if self.budget_usd is not None and state.decider_cost.spent(self.budget_usd):
            return await self._offline(state, received_at, "the model budget is spent")
        request = extraction_request(
            state, model=self.model, max_tokens=self.max_tokens, nonce=self.nonce(), now=received_at
        )
        try:
            message = await self.client.messages.create(**request)
        except anthropic.APIError as e:
            return await self._offline(state, received_at, f"the model could not read it ({describe(e)})")
        body = message.model_dump(mode="json")
        usage = usage_of(body)
        facts, notes = facts_from_model_text(text_of(body), received_at)
        if facts is None:
            fallback = await self._offline(state, received_at, "; ".join(notes))
            return fallback.model_copy(update={"usage": usage, "usd": self.price.cost(usage)})
        return facts.model_copy(update={"usage": usage, "usd": self.price.cost(usage), "extracted_by": self.model})

    async def _offline(self, state: State, received_at: float, why: str) -> ReplyFacts:
        facts = await self.offline.read(state, received_at)
        return facts.model_copy(update={"extracted_by": f"offline ({why})"[:200]})
