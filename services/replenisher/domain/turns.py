"""One turn's decision: ask the decider, check its choice in code, ask again, or let the rules decide.

The decider (a model, or the offline policy) proposes a tool and arguments. The proposal is
taken only if the tool is allowed now, its arguments parse against the tool's schema and
pass its business checks. A refused proposal is recorded and the decider is told why and
asked again, a bounded number of times; after that, or when the decider cannot be reached,
or when the run's model budget is spent, the offline policy takes the turn.

Pure: how the decider is asked (journaled, retried) is the caller's business, passed in as
`ask`. Everything here reads and writes only the state, so a replay of the same journaled
answers makes the same decision.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from pydantic import ValidationError

from replenisher.domain.decisions import ONLY_ALLOWED, DeciderTerms, Decision, Refusal
from replenisher.domain.policy import choose
from replenisher.domain.security_log import DECIDER_SOURCE
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS_BY_NAME, Tool

Ask = Callable[[int, Sequence[Refusal]], Awaitable[Decision]]


class DeciderUnavailable(Exception):
    """The decider could not answer (retries spent, or refused for good): the rules take the turn."""


def refuse(decision: Decision, state: State, allowed: Sequence[Tool]) -> str | None:
    """Why this choice may not be taken now, or None if it may."""
    if decision.tool not in {t.name for t in allowed}:
        known = decision.tool in TOOLS_BY_NAME
        return "not an allowed tool now" if known else "no such tool"
    tool = TOOLS_BY_NAME[decision.tool]
    try:
        args = tool.parse_args(decision.args)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'args'}: {err['msg']}" for err in e.errors())
        return f"bad arguments: {problems}"[:300]
    return tool.check_args(state, args)


def only_choice(state: State, allowed: Sequence[Tool]) -> Decision | None:
    """The one allowed tool, when it needs no arguments the decider would have to choose."""
    if len(allowed) != 1:
        return None
    tool = allowed[0]
    try:
        args = tool.parse_args({})
    except ValidationError:
        return None
    if tool.check_args(state, args) is not None:
        return None
    return Decision(tool=tool.name, reason="the only tool allowed now", decider=ONLY_ALLOWED)


async def decide_turn(turn: int, state: State, allowed: Sequence[Tool], ask: Ask, terms: DeciderTerms) -> Decision:
    ledger = state.decider_cost
    if terms.skip_single and (only := only_choice(state, allowed)) is not None:
        # Nothing to decide: a model call would cost money and could only pick this or be refused.
        ledger.only_allowed += 1
        return only
    refusals: list[Refusal] = []
    why_rules = "the decider's choices were refused"
    for attempt in range(terms.asks_per_turn):
        if terms.budget_usd is not None and ledger.spent(terms.budget_usd):
            ledger.budget_stops += 1
            why_rules = f"the run's model budget of {terms.budget_usd:.2f} USD is spent"
            break
        try:
            decision = await ask(attempt, tuple(refusals))
        except DeciderUnavailable as e:
            why_rules = f"decider unavailable: {e}"
            break
        for lost in decision.lost:
            if lost.usage is None:
                ledger.unpriced += 1
            else:
                ledger.recovered += 1
                ledger.charge(lost.usage, lost.usd)
        if decision.usage is not None:
            ledger.charge(decision.usage, decision.usd)
        refusal = refuse(decision, state, allowed)
        if refusal is None:
            return decision
        ledger.refused += 1
        refusals.append(
            Refusal(tool=decision.tool[:80], arg_names=[str(k)[:40] for k in decision.args][:10], reason=refusal)
        )
        state.record_security_event(
            DECIDER_SOURCE, f"turn {turn}: refused {decision.decider} choice {decision.tool[:80]!r}: {refusal}"
        )
    fallback = choose(state, [t.name for t in allowed])
    ledger.fallbacks += 1
    return fallback.model_copy(update={"reason": f"{fallback.reason} (rules took the turn: {why_rules})"})
