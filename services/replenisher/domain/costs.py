"""What the model costs: token usage per call, a price per model, and a ledger per run and per SKU.

Pure arithmetic. The ledger travels in the run's state (so a replay rebuilds the same sums
from the journaled decisions) and is added to the SKU's record when the run ends.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Cache writes (5-minute TTL) and reads are priced relative to plain input tokens.
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.10


class TokenUsage(BaseModel):
    """The usage block of one Messages API response, with absent cache fields as 0."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
        )


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(frozen=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, usage: TokenUsage) -> float:
        tokens_in = (
            usage.input_tokens
            + usage.cache_creation_input_tokens * CACHE_WRITE_FACTOR
            + usage.cache_read_input_tokens * CACHE_READ_FACTOR
        )
        return round((tokens_in * self.input_per_mtok + usage.output_tokens * self.output_per_mtok) / 1e6, 8)


# List prices by model family (longest matching prefix wins). A model not listed is priced
# as the most expensive family, so an unknown id can only make the budget stricter.
PRICES: dict[str, ModelPrice] = {
    "claude-haiku-4": ModelPrice(input_per_mtok=1.0, output_per_mtok=5.0),
    "claude-3-5-haiku": ModelPrice(input_per_mtok=0.8, output_per_mtok=4.0),
    "claude-sonnet-4": ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0),
    "claude-3-7-sonnet": ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0),
    "claude-opus-4-5": ModelPrice(input_per_mtok=5.0, output_per_mtok=25.0),
    "claude-opus-4-1": ModelPrice(input_per_mtok=15.0, output_per_mtok=75.0),
    "claude-opus-4-0": ModelPrice(input_per_mtok=15.0, output_per_mtok=75.0),
}
UNKNOWN_MODEL_PRICE = ModelPrice(input_per_mtok=15.0, output_per_mtok=75.0)


# The smallest prefix the API caches, in tokens, by model family (Anthropic's prompt-caching
# documentation, "minimum cacheable prompt length"): a `cache_control` breakpoint on a shorter
# prefix is ignored without an error, and the whole prompt is billed as plain input. A model
# not listed gets the largest minimum, so the project never counts on a cache it may not get.
# Checked against the documentation's table as quoted in anthropics/anthropic-sdk-python#1194
# (February 2026): 1024 for Sonnet 4.6/4.5/4, Opus 4.1/4 and Sonnet 3.7; 4096 for Opus 4.6/4.5
# and Haiku 4.5; 2048 for Haiku 3.5/3. That issue reports Sonnet caching only from 2048 in
# practice; the ledger counts what the API's usage says, never this table.
CACHE_MINIMUM_TOKENS: dict[str, int] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4": 1024,  # Sonnet 4, 4.5 and 4.6
    "claude-3-7-sonnet": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4-0": 1024,
    "claude-opus-4-2": 1024,  # claude-opus-4-20250514, Opus 4's dated id
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
UNKNOWN_MODEL_CACHE_MINIMUM = 4096


def cache_minimum_tokens(model: str) -> int:
    matches = [prefix for prefix in CACHE_MINIMUM_TOKENS if model.startswith(prefix)]
    return CACHE_MINIMUM_TOKENS[max(matches, key=len)] if matches else UNKNOWN_MODEL_CACHE_MINIMUM


def price_of(model: str, override: ModelPrice | None = None) -> ModelPrice:
    if override is not None:
        return override
    matches = [prefix for prefix in PRICES if model.startswith(prefix)]
    return PRICES[max(matches, key=len)] if matches else UNKNOWN_MODEL_PRICE


class CostLedger(BaseModel):
    """Model calls, tokens and dollars, plus how often the code had to overrule the model."""

    calls: int = 0
    usage: TokenUsage = Field(default_factory=TokenUsage)
    usd: float = 0.0
    refused: int = Field(default=0, description="model choices refused by the rules")
    fallbacks: int = Field(default=0, description="turns the offline policy took instead of the model")
    budget_stops: int = Field(default=0, description="turns the spent budget gave to the offline policy")
    only_allowed: int = Field(default=0, description="turns taken without a model call: one tool was allowed")
    recovered: int = Field(
        default=0, description="calls answered before a crash lost them unjournaled: charged (in calls and usd)"
    )
    unpriced: int = Field(
        default=0,
        description="calls that may have been answered and billed before a crash, usage lost with the process: "
        "not in usd, which is then a lower bound",
    )

    def charge(self, usage: TokenUsage, usd: float) -> None:
        self.calls += 1
        self.usage = self.usage + usage
        self.usd = round(self.usd + usd, 8)

    def add(self, other: CostLedger) -> None:
        self.calls += other.calls
        self.usage = self.usage + other.usage
        self.usd = round(self.usd + other.usd, 8)
        self.refused += other.refused
        self.fallbacks += other.fallbacks
        self.budget_stops += other.budget_stops
        self.only_allowed += other.only_allowed
        self.recovered += other.recovered
        self.unpriced += other.unpriced

    def spent(self, budget_usd: float) -> bool:
        return self.usd >= budget_usd
