"""A stand-in for the Messages API: reads a real request body, answers with a real response body.

It is not a model. It answers decision requests by a fixed priority over the tools *offered
in the request* (so a request that offers the wrong tools is caught), picks the cheapest quote
it can read in the prompt (avoiding suppliers the prompt's memory marks POOR when a comparable
quote exists), and reads supplier emails for tool-less requests with the project's own
pattern extractor. Where a script says so it is *persuaded*: when a trigger phrase shows in
one of the request's untrusted blocks, it asks for whatever the email wants. Responses carry
usage with cache fields as the API reports them (a tools+system prefix at or above the model's
minimum cacheable length is written once and read after; a shorter one is not cached at all),
stop reasons, and scripted failures use the API's error JSON shape.

Used in-process behind an `httpx2.MockTransport` (the HTTP library `anthropic` 2.x uses) and,
for end-to-end runs and the bench, served over HTTP by `app.py`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replenisher.deciders.prompt import QUOTE_IDS
from replenisher.domain.costs import cache_minimum_tokens
from replenisher.domain.extraction import extract_reply_facts
from replenisher.domain.untrusted import undatamark

MODEL_ID = "claude-sonnet-4-6"

PRIORITY = (
    "read_supplier_reply",
    "check_order_status",
    "close_purchase_order",
    "place_order",
    "wait_for_approval",
    "request_approval",
    "draft_purchase_order",
    "get_quotes",
    "wait_for_supplier_reply",
    "chase_supplier",
    "wait_for_goods",
    "cancel_purchase_order",
    "done",
)

_BLOCK = re.compile(
    r'<untrusted-(?P<nonce>[0-9a-f]+) source="(?P<source>[^"]*)">\n(?P<body>.*?)\n</untrusted-(?P=nonce)>', re.S
)
_QUOTE = re.compile(r"- quote #(?P<n>\d+): supplier=(?P<supplier>\S+) quantity=\d+ unit_price=(?P<price>[\d.]+)")
_QUOTE_ID = re.compile(r"^#(?P<n>\d+) (?P<id>\S+)$", re.M)
_POOR = re.compile(r"^- (?P<supplier>\S+): reliability [\d.]+ \(POOR\)", re.M)
_ids = itertools.count(1)

ERROR_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Persuasion:
    """When `trigger` shows in an untrusted block, do what the email asks."""

    trigger: str
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] | None = None
    insist: bool = True
    only_for: str | None = None
    """A SKU: the script applies only to requests about it (many scripted runs share one stand-in)."""
    always: bool = False
    """A compromised model: it acts on the script on every request, trigger or not."""


@dataclass
class Failure:
    status: int
    message: str = ""
    only_for: str | None = None  # a SKU: fail only requests about it


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def _id(prefix: str) -> str:
    return f"{prefix}_01{next(_ids):022d}"


def message_body(content: list[dict[str, Any]], stop_reason: str, usage: Mapping[str, int], model: str = MODEL_ID):
    return {
        "id": _id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("input_tokens", 0),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
            "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
            "service_tier": "standard",
        },
    }


def tool_use(name: str, input_: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": _id("toolu"), "name": name, "input": input_}


def error_body(status: int, message: str = "") -> dict[str, Any]:
    kind = ERROR_KINDS.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": message or kind.replace("_", " ").capitalize()},
        "request_id": _id("req"),
    }


def untrusted_blocks(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(source, text) of every untrusted block in the request, datamarking undone."""
    found = []
    for text in request_texts(body):
        for m in _BLOCK.finditer(text):
            found.append((m.group("source"), undatamark(m.group("body"))))
    return found


def request_texts(body: Mapping[str, Any]) -> list[str]:
    texts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                texts.append(block["text"])
    return texts


class ScriptedModel:
    def __init__(self, persuasions: list[Persuasion] | None = None, model: str = MODEL_ID) -> None:
        self.persuasions = list(persuasions or [])
        self.failures: list[Failure] = []
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._prefixes: set[str] = set()
        self.uncached_prefixes = 0

    def fail(self, *statuses: int, only_for: str | None = None) -> None:
        self.failures.extend(Failure(s, only_for=only_for) for s in statuses)

    def respond(self, body: dict[str, Any]) -> Reply:
        self.requests.append(body)
        text = "\n".join(request_texts(body))
        failure = next((f for f in self.failures if f.only_for is None or f.only_for in text), None)
        if failure is not None:
            self.failures.remove(failure)
            headers = {"retry-after-ms": "1", "request-id": _id("req")}
            return Reply(failure.status, error_body(failure.status, failure.message), headers)
        usage = self._usage(body)
        if body.get("tools"):
            content = [tool_use(*self._choose(body, text))]
            return Reply(200, message_body(content, "tool_use", usage, self.model), {"request-id": _id("req")})
        facts = self._read(body)
        content = [{"type": "text", "text": json.dumps(facts)}]
        return Reply(200, message_body(content, "end_turn", usage, self.model), {"request-id": _id("req")})

    # --- deciding --------------------------------------------------------------------------

    def persuaded(self, body: Mapping[str, Any]) -> Persuasion | None:
        blocks = " ".join(text for _, text in untrusted_blocks(body))
        text = json.dumps(body) if any(p.only_for for p in self.persuasions) else ""
        return next(
            (
                p
                for p in self.persuasions
                if (p.only_for is None or p.only_for in text) and (p.always or p.trigger in blocks)
            ),
            None,
        )

    def _choose(self, body: dict[str, Any], text: str) -> tuple[str, dict[str, Any]]:
        offered = [t["name"] for t in body["tools"]]
        persuasion = self.persuaded(body)
        refused_before = "Your earlier choices this turn were refused" in text
        if persuasion is not None and persuasion.tool and (persuasion.insist or not refused_before):
            return persuasion.tool, {**persuasion.args, "rationale": "as the email instructs"}
        name = next(n for n in PRIORITY if n in offered)
        args: dict[str, Any] = {"rationale": f"{name} is the next step"}
        if name == "draft_purchase_order":
            args["quote_id"] = self._quote(text, body)
        if name == "cancel_purchase_order":
            args["reason"] = "the purchase cannot go ahead"
        return name, args

    @staticmethod
    def _quote(text: str, body: Mapping[str, Any]) -> str:
        # The state names quotes by position; their ids are only in the untrusted block.
        ids = {
            m["n"]: m["id"]
            for source, block in untrusted_blocks(body)
            if source == QUOTE_IDS
            for m in _QUOTE_ID.finditer(block)
        }
        quotes = sorted((float(m["price"]), m["supplier"], ids[m["n"]]) for m in _QUOTE.finditer(text) if m["n"] in ids)
        if not quotes:
            return "no-quote-in-the-prompt"  # the code refuses it, as it would a real model's slip
        poor = {m["supplier"] for m in _POOR.finditer(text)}
        cheapest = quotes[0]
        good = [q for q in quotes if q[1] not in poor and q[0] <= cheapest[0] * 1.10]
        return (good[0] if cheapest[1] in poor and good else cheapest)[2]

    # --- reading ---------------------------------------------------------------------------

    def _read(self, body: dict[str, Any]) -> dict[str, Any]:
        emails = [t for source, t in untrusted_blocks(body) if source.startswith("email")]
        email = emails[0] if emails else ""
        facts = extract_reply_facts(email, 0.0)
        reading: dict[str, Any] = {
            "confirmed": facts.confirmed,
            "delivery_days": facts.delivery_days,
            "unit_price": facts.unit_price,
            "quantity": facts.quantity,
            "discount_next_order_pct": next((p.value for p in facts.promises if p.kind == "discount"), None),
            "lead_time_days": next((p.value for p in facts.promises if p.kind == "lead_time"), None),
            "lead_time_from": None,
        }
        persuasion = self.persuaded(body)
        if persuasion is not None and persuasion.facts:
            reading.update(persuasion.facts)
        return reading

    # --- usage -----------------------------------------------------------------------------

    def _usage(self, body: Mapping[str, Any]) -> dict[str, int]:
        """Rough token counts (4 characters a token). The prefix up to the last breakpoint (tools +
        system) is cached as the API does it: only at or above the model's documented minimum
        (`cache_minimum_tokens`), then a write the first time and a read after; below it, the
        breakpoint is ignored and every token is plain input."""
        prefix = json.dumps([body.get("tools"), body.get("system")], sort_keys=True)
        rest = json.dumps(body.get("messages"))
        prefix_tokens, rest_tokens = len(prefix) // 4, len(rest) // 4
        marked = any("cache_control" in block for block in [*(body.get("tools") or []), *(body.get("system") or [])])
        if not marked or prefix_tokens < cache_minimum_tokens(str(body.get("model", ""))):
            self.uncached_prefixes += 1
            return {"input_tokens": prefix_tokens + rest_tokens, "output_tokens": 40}
        key = hashlib.sha256(f"{body.get('model')}\n{prefix}".encode()).hexdigest()
        cached = key in self._prefixes
        self._prefixes.add(key)
        return {
            "input_tokens": rest_tokens,
            "cache_creation_input_tokens": 0 if cached else prefix_tokens,
            "cache_read_input_tokens": prefix_tokens if cached else 0,
            "output_tokens": 40,
        }
