"""A Messages API response turned into a `Decision`, and its usage into tokens and dollars. Pure.

The response is read as the API's JSON (`message.model_dump()`), so tests can feed the same
bodies the API sends. Nothing here judges the choice: `domain.turns.refuse` does.
"""

from __future__ import annotations

from typing import Any

from replenisher.deciders.prompt import RATIONALE
from replenisher.domain.costs import ModelPrice, TokenUsage
from replenisher.domain.decisions import Decision

MAX_REASON = 200
MAX_TOOL_NAME = 80


def usage_of(body: dict[str, Any]) -> TokenUsage:
    raw = body.get("usage") or {}
    return TokenUsage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_creation_input_tokens=int(raw.get("cache_creation_input_tokens") or 0),
        cache_read_input_tokens=int(raw.get("cache_read_input_tokens") or 0),
    )


def decision_from_message(body: dict[str, Any], price: ModelPrice, decider: str = "claude") -> Decision:
    """The first tool call in the response; an empty tool (refused by the rules) if there is none."""
    usage = usage_of(body)
    common: dict[str, Any] = {
        "decider": decider,
        "model": body.get("model"),
        "usage": usage,
        "usd": price.cost(usage),
        "stop_reason": body.get("stop_reason"),
    }
    call = next((b for b in body.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"), None)
    if call is None:
        return Decision(tool="", reason=f"the model called no tool (stop_reason={body.get('stop_reason')})", **common)
    raw_input = call.get("input")
    args = dict(raw_input) if isinstance(raw_input, dict) else {}
    rationale = args.pop(RATIONALE, "")
    return Decision(
        tool=str(call.get("name") or "")[:MAX_TOOL_NAME],
        args=args,
        reason=str(rationale)[:MAX_REASON],
        **common,
    )


def text_of(body: dict[str, Any]) -> str:
    return "".join(
        b.get("text", "") for b in body.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"
    )
