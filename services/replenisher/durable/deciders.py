"""Which decider picks the tools, and how a run asks it: each ask is one journaled step.

The offline policy is the default (no model, no key). `REPLENISHER_DECIDER=claude` selects
the Claude decider, with the model id from `REPLENISHER_CLAUDE_MODEL` and the key from
`ANTHROPIC_API_KEY`; it then also reads supplier replies (a tool-less model call) unless
`REPLENISHER_CLAUDE_READ_REPLIES=false`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from restate import WorkflowContext
from restate.exceptions import TerminalError

from replenisher.config import Settings, settings
from replenisher.domain.costs import ModelPrice
from replenisher.domain.decisions import GOAL, Decider, DeciderTerms, Decision, Refusal
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.policy import OfflinePolicy
from replenisher.domain.ports import Rejected, ReplyReader
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.domain.turns import Ask, DeciderUnavailable
from replenisher.durable.probes import crash_point, record_decision
from replenisher.durable.steps import retry_options

if TYPE_CHECKING:
    # Imported only when Claude is chosen: the SDK takes seconds to import, which every
    # restart of the service would otherwise pay.
    import anthropic


def check_claude_settings(s: Settings) -> None:
    """Fail at start-up, not at the first decision, when Claude is chosen but cannot be called."""
    if s.decider == "claude" and (s.anthropic_api_key is None or not s.anthropic_api_key.get_secret_value()):
        raise SystemExit("REPLENISHER_DECIDER=claude needs ANTHROPIC_API_KEY in the service's environment")


def price_override(s: Settings) -> ModelPrice | None:
    if s.claude_input_usd_per_mtok is None or s.claude_output_usd_per_mtok is None:
        return None
    return ModelPrice(input_per_mtok=s.claude_input_usd_per_mtok, output_per_mtok=s.claude_output_usd_per_mtok)


@cache
def claude_client() -> anthropic.AsyncAnthropic:
    from replenisher.deciders.claude import make_client

    s = settings()
    check_claude_settings(s)
    assert s.anthropic_api_key is not None
    return make_client(
        s.anthropic_api_key.get_secret_value(),
        base_url=s.anthropic_base_url,
        max_retries=s.claude_max_retries,
        timeout_seconds=s.claude_timeout_seconds,
    )


@cache
def current_decider() -> Decider:
    s = settings()
    if s.decider == "claude":
        from replenisher.deciders.claude import ClaudeDecider

        return ClaudeDecider(claude_client(), s.claude_model, max_tokens=s.claude_max_tokens, price=price_override(s))
    return OfflinePolicy()


@cache
def current_reader() -> ReplyReader:
    s = settings()
    if s.decider == "claude" and s.claude_read_replies:
        from replenisher.deciders.claude import ClaudeReplyReader

        return ClaudeReplyReader(
            claude_client(), s.claude_model, price=price_override(s), budget_usd=s.claude_budget_usd
        )
    return OfflineReplyReader()


def decider_terms() -> DeciderTerms:
    """Fixed into each run's request when it starts."""
    s = settings()
    if s.decider == "offline":
        return DeciderTerms()
    return DeciderTerms(asks_per_turn=s.claude_asks_per_turn, budget_usd=s.claude_budget_usd)


def journaled_ask(ctx: WorkflowContext, turn: int, decider: Decider, state: State, allowed: Sequence[Tool]) -> Ask:
    """Ask the decider as a journaled step, retried with backoff; a replay returns the journaled answer."""
    scope = ctx.key()

    async def ask(attempt: int, refusals: Sequence[Refusal]) -> Decision:
        # The first ask keeps the name it always had, so runs journaled before re-asks existed replay.
        name = f"decide {turn}" if attempt == 0 else f"decide {turn} again {attempt}"

        async def take_decision() -> Decision:
            crash_point(scope, name, "before")
            record_decision(scope, turn)
            try:
                decision = await decider.decide(GOAL, state, allowed, refusals)
            except Rejected as e:
                raise TerminalError(e.reason, status_code=e.status) from e
            crash_point(scope, name, "after")
            return decision

        try:
            return await ctx.run_typed(name, take_decision, retry_options(Decision))
        except TerminalError as e:
            raise DeciderUnavailable(e.message) from e

    return ask


check_claude_settings(settings())
