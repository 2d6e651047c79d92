"""Facts out of a supplier's email, never instructions: typed fields, validated in code.

Two extractors fill the same `ReplyFacts`: the offline one matches patterns
(`extract_reply_facts`), and a model may read the email in a tool-less call whose JSON answer
goes through `facts_from_model_text`. Either way only these fields come out, each checked
against its bounds; anything else the text (or a persuaded model) offers is dropped and
noted. What the facts may then change is decided by the tools, not by the text.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replenisher.domain.promises import MAX_DISCOUNT_PCT, MAX_LEAD_DAYS, PromiseClaim
from replenisher.domain.state import ReplyFacts, State

BUSINESS_DAYS_PER_WEEK = 5

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    )
}
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_FROM_MONTH = re.compile(
    r"\b(?:from|starting(?:\s+in)?|beginning(?:\s+of)?|as\s+of|after|in)\s+"
    r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?(?:\s+(\d{4}))?",
    re.I,
)
_DISCOUNT = re.compile(
    r"(\d{1,2}(?:\.\d{1,2})?)\s*(?:%|per\s*cent|percent)[^.!?\n]{0,80}?\bnext\s+(?:order|purchase)",
    re.I,
)
_LEAD_TIME = re.compile(
    r"lead[\s-]*times?\b[^.!?\n\d]{0,40}(\d{1,3})\s*(weeks?|(?:business\s+|working\s+)?days?)",
    re.I,
)


def _sentence_after(text: str, start: int) -> str:
    end = _SENTENCE_END.search(text, start)
    return text[start : end.start() if end else len(text)]


def month_start_after(month: int, year: int | None, received_at: float) -> float:
    """The first day of `month` (in `year`, or the next time it comes round) as epoch seconds;
    a month already under way means from now."""
    received = datetime.fromtimestamp(received_at, UTC)
    if year is None:
        year = received.year if month >= received.month else received.year + 1
    start = datetime(year, month, 1, tzinfo=UTC).timestamp()
    return max(start, received_at)


def _effective_from(sentence: str, received_at: float) -> float | None:
    found = _FROM_MONTH.search(sentence)
    if found is None:
        return None
    year = int(found.group(2)) if found.group(2) else None
    return month_start_after(_MONTHS[found.group(1).lower()[:3]], year, received_at)


def extract_promises(text: str, received_at: float) -> list[PromiseClaim]:
    """Discounts on the next order and announced lead times, as the offline extractor sees them."""
    claims: list[PromiseClaim] = []
    for match in _DISCOUNT.finditer(text):
        pct = float(match.group(1))
        if 0 < pct <= MAX_DISCOUNT_PCT:
            when = _effective_from(_sentence_after(text, match.start()), received_at)
            claims.append(PromiseClaim(kind="discount", value=pct, effective_from=when))
    for match in _LEAD_TIME.finditer(text):
        n = float(match.group(1))
        days = n * BUSINESS_DAYS_PER_WEEK if match.group(2).lower().startswith("week") else n
        if 0 < days <= MAX_LEAD_DAYS:
            when = _effective_from(_sentence_after(text, match.start()), received_at)
            claims.append(PromiseClaim(kind="lead_time", value=days, effective_from=when))
    return claims[:4]


# Tool-less extraction of typed facts: the text is matched, never obeyed.
_DAYS = re.compile(
    r"(?:deliver\w*|ship\w*|dispatch\w*|arriv\w*)\D{0,40}?(\d{1,5}(?:\.\d+)?)\s*(?:business\s+)?days?", re.I
)
_PRICE = re.compile(r"(?:price|cost|at)\D{0,20}?(\d{1,7}\.\d{2})", re.I)
_CONFIRM = re.compile(r"\b(confirm\w*|accept\w*|acknowledg\w*)\b", re.I)


def extract_reply_facts(text: str, received_at: float) -> ReplyFacts:
    days = _DAYS.search(text)
    price = _PRICE.search(text)
    return ReplyFacts(
        confirmed=bool(_CONFIRM.search(text)),
        delivery_days=float(days.group(1)) if days else None,
        unit_price=float(price.group(1)) if price else None,
        received_at=received_at,
        promises=extract_promises(text, received_at),
    )


class ModelFacts(BaseModel):
    """The JSON object a model's tool-less reading of an email must come back as."""

    model_config = ConfigDict(extra="forbid")

    confirmed: bool = Field(default=False, description="the email confirms the order")
    delivery_days: float | None = Field(default=None, ge=0, le=MAX_LEAD_DAYS, description="days until delivery")
    unit_price: float | None = Field(default=None, gt=0, le=1_000_000, description="a unit price the email states")
    quantity: int | None = Field(default=None, gt=0, le=1_000_000, description="a quantity the email states")
    discount_next_order_pct: float | None = Field(
        default=None, gt=0, le=MAX_DISCOUNT_PCT, description="percent off a future order the supplier promises"
    )
    lead_time_days: float | None = Field(
        default=None, gt=0, le=MAX_LEAD_DAYS, description="a new lead time the supplier announces, in business days"
    )
    lead_time_from: date | None = Field(default=None, description="from when the new lead time applies")


MODEL_FACT_FIELDS = tuple(ModelFacts.model_fields)


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def facts_from_model_text(text: str, received_at: float) -> tuple[ReplyFacts | None, list[str]]:
    """Validate a model's reading field by field: a bad field is dropped (and noted), not trusted."""
    raw = _json_object(text)
    if raw is None:
        return None, ["the model's reading of the email was not a JSON object"]
    notes: list[str] = []
    unknown = sorted(str(k)[:40] for k in raw if k not in MODEL_FACT_FIELDS)
    if unknown:
        notes.append(f"reading of the email offered fields that are never taken: {', '.join(unknown[:8])}")
    good: dict[str, Any] = {}
    for key in MODEL_FACT_FIELDS:
        if key not in raw or raw[key] is None:
            continue
        try:
            ModelFacts.model_validate({key: raw[key]})
        except ValidationError:
            notes.append(f"reading of the email gave an invalid {key}: dropped")
            continue
        good[key] = raw[key]
    facts = ModelFacts.model_validate(good)
    promises: list[PromiseClaim] = []
    if facts.discount_next_order_pct is not None:
        promises.append(PromiseClaim(kind="discount", value=facts.discount_next_order_pct))
    if facts.lead_time_days is not None:
        when = None
        if facts.lead_time_from is not None:
            day = facts.lead_time_from
            when = max(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp(), received_at)
        promises.append(PromiseClaim(kind="lead_time", value=facts.lead_time_days, effective_from=when))
    return (
        ReplyFacts(
            confirmed=facts.confirmed,
            delivery_days=facts.delivery_days,
            unit_price=facts.unit_price,
            quantity=facts.quantity,
            received_at=received_at,
            promises=promises,
            extracted_by="model",
            notes=notes,
        ),
        notes,
    )


class OfflineReplyReader:
    """The pattern extractor behind the `ReplyReader` port: no model, no network."""

    name = "offline"

    async def read(self, state: State, received_at: float) -> ReplyFacts:
        assert state.unread_reply is not None
        return extract_reply_facts(state.unread_reply.text, received_at)
