"""Finding a supplier: get_quotes, draft_purchase_order."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field

from replenisher.domain.documents import PurchaseOrder, Quote, QuoteRequest, new_approval_token
from replenisher.domain.memory import discount_request_note
from replenisher.domain.ports import Malformed, Rejected, World
from replenisher.domain.security_log import UNKNOWN_SOURCE, supplier_source
from replenisher.domain.sku import split_run_id
from replenisher.domain.state import State
from replenisher.domain.tools.base import Call, NoArgs
from replenisher.domain.tools.limits import MAX_APPROVAL_ROUNDS, MAX_QUOTE_ROUNDS
from replenisher.domain.tools.vetting import quote_objections, shown


class QuoteOffer(BaseModel):
    """A quote with the supplier it was asked of: what it claims is checked against that."""

    asked: str
    quote: Quote


class QuotesResult(BaseModel):
    offers: list[QuoteOffer] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)
    malformed: list[str] = Field(default_factory=list, description="answers outside the quote contract")
    at: float | None = Field(default=None, description="when the quotes were asked for; None in journals from before")
    answered_at: float | None = Field(default=None, description="when the last answer came in")
    quotes: list[Quote] = Field(
        default_factory=list, description="journals from before `offers`: taken as from the supplier they name"
    )


def answered_by(state: State, failure: str) -> str:
    """The source of a failure written `<supplier>: <reason>` (see `GetQuotes.execute`)."""
    return next((supplier_source(s) for s in state.suppliers if failure.startswith(f"{s}: ")), UNKNOWN_SOURCE)


def open_for_buying(state: State) -> bool:
    """No order is, or may be, at a supplier and the run is still going."""
    return not state.is_finished and state.order_status in ("none", "not_found")


def quote_valid(quote: Quote, state: State) -> bool:
    """A quote binds the supplier only until `valid_until`, read against the run's journaled clock."""
    return state.now < quote.valid_until


def usable_quotes(state: State) -> list[Quote]:
    return [q for q in state.quotes if quote_valid(q, state)]


def drafted_quote_expired(state: State) -> bool:
    """The drafted PO rests on a quote that no longer binds: the manager must not be asked about it."""
    po = state.po
    if po is None:
        return False
    quote = next((q for q in state.quotes if q.quote_id == po.quote_id), None)
    return quote is None or not quote_valid(quote, state)


def stale_draft(state: State) -> bool:
    """A draft nobody approved whose quote expired: only a new round of quotes can replace it."""
    return state.approval is None and drafted_quote_expired(state)


def rounds_left_to_requote(state: State) -> bool:
    """The run may still get fresh quotes and put them to the manager: it has a round of quotes
    and an approval request left. Neither is worth having once the manager can no longer be asked."""
    return state.quote_rounds < MAX_QUOTE_ROUNDS and state.approval_rounds < MAX_APPROVAL_ROUNDS


class GetQuotes(Call[NoArgs, QuotesResult]):
    name = "get_quotes"
    description = (
        "Ask every approved supplier of this SKU for a quote for the quantity needed to bring "
        "stock up to its target level."
    )
    Args = NoArgs
    Result = QuotesResult

    def allowed(self, state: State) -> bool:
        return open_for_buying(state) and (state.po is None or stale_draft(state)) and rounds_left_to_requote(state)

    async def execute(self, state: State, args: NoArgs, world: World) -> QuotesResult:
        async def ask(supplier: str) -> QuoteOffer | tuple[str, Rejected]:
            # A discount the supplier promised (the SKU's memory) is asked for in the request.
            note = discount_request_note(state.memory, supplier, state.started_at)
            request = QuoteRequest(sku=state.sku, quantity=state.order_quantity, note=note)
            try:
                return QuoteOffer(asked=supplier, quote=await world.suppliers.quote(supplier, request))
            except Rejected as e:
                return supplier, e

        # Validity is judged against when we asked: an honest quote is never "expired on
        # arrival" however slow the answer, a quote that was expired before it was asked for is.
        asked_at = world.clock()
        # A supplier that is down fails the whole step, so it is retried; one that
        # refuses (does not carry the SKU) or answers outside the contract is left out.
        answers = await asyncio.gather(*(ask(s) for s in state.suppliers))
        refused = [a for a in answers if isinstance(a, tuple)]
        return QuotesResult(
            offers=[a for a in answers if isinstance(a, QuoteOffer)],
            failures=[f"{s}: {e.reason}" for s, e in refused if not isinstance(e, Malformed)],
            malformed=[f"{s}: {e.reason}" for s, e in refused if isinstance(e, Malformed)],
            at=asked_at,
            answered_at=world.clock(),
        )

    def apply(self, state: State, args: NoArgs, result: QuotesResult) -> str:
        if stale_draft(state):
            state.po, state.approval_token = None, None
        state.quote_rounds += 1
        offers = result.offers or [QuoteOffer(asked=q.supplier, quote=q) for q in result.quotes]
        accepted: list[Quote] = []
        failures = list(result.failures)
        for reason in result.malformed:
            failures.append(reason)
            state.record_security_event(answered_by(state, reason), f"quote refused: {reason}")
        for offer in offers:
            quote = offer.quote
            wrong = quote_objections(
                quote,
                asked=offer.asked,
                sku=state.sku,
                quantity=state.order_quantity,
                at=result.at,
                answered_at=result.answered_at,
                day_seconds=state.day_seconds,
            )
            if any(q.quote_id == quote.quote_id for q in accepted):
                # Two quotes under one id: a PO drafted against it could mean either.
                wrong.append(f"repeats quote id {shown(quote.quote_id)}")
            if wrong:
                failures.append(f"{offer.asked}: quote refused: it {'; it '.join(wrong)}")
                state.record_security_event(
                    supplier_source(offer.asked), f"quote from {offer.asked} refused: it {'; it '.join(wrong)}"
                )
            else:
                accepted.append(quote)
        state.quotes = sorted(accepted, key=lambda q: q.unit_price)
        state.quote_failures = failures
        state.last_failure = None
        if not state.quotes:
            state.last_failure = "no supplier quoted"
        count = f"{len(state.quotes)} quote{'' if len(state.quotes) == 1 else 's'}"
        return count + (f", cheapest {state.quotes[0].unit_price:.2f}" if state.quotes else "")


class DraftArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    quote_id: str = Field(description="the quote to order against")


class DraftResult(BaseModel):
    po: PurchaseOrder
    approval_token: str = Field(description="the one-time token the manager's approval of this PO must carry")


class DraftPurchaseOrder(Call[DraftArgs, DraftResult]):
    name = "draft_purchase_order"
    description = (
        "Draft a purchase order against one of the quotes received (the quote fixes supplier, quantity and price)."
    )
    Args = DraftArgs
    Result = DraftResult

    def allowed(self, state: State) -> bool:
        return (
            open_for_buying(state)
            and state.po is None
            and bool(usable_quotes(state))
            and state.approval_rounds < MAX_APPROVAL_ROUNDS
        )

    def check_args(self, state: State, args: DraftArgs) -> str | None:
        quote = next((q for q in state.quotes if q.quote_id == args.quote_id), None)
        if quote is None:
            return f"no quote {args.quote_id!r} on the table"
        if not quote_valid(quote, state):
            return f"quote {args.quote_id!r} has expired: get new quotes"
        return None

    async def execute(self, state: State, args: DraftArgs, world: World) -> DraftResult:
        quote = next(q for q in state.quotes if q.quote_id == args.quote_id)
        # The PO number is the order's idempotency key at the supplier: derived from the
        # run and the revision, so every retry and replay sends the same one.
        sku, number = split_run_id(state.run_id)
        po_number = f"PO-{sku}-{number}-{state.po_revision + 1}"
        return DraftResult(
            # Minted here, journaled with the draft: however often request_approval is retried
            # or replayed, the manager sees one request with one token for this PO.
            approval_token=new_approval_token(),
            po=PurchaseOrder(
                po_number=po_number,
                sku=state.sku,
                supplier=quote.supplier,
                quantity=quote.quantity,
                unit_price=quote.unit_price,
                quote_id=quote.quote_id,
            ),
        )

    def apply(self, state: State, args: DraftArgs, result: DraftResult) -> str:
        state.po = result.po
        state.approval_token = result.approval_token
        state.po_revision += 1
        state.approval = None
        state.last_failure = None
        return f"{result.po.po_number}: {result.po.quantity} x {result.po.unit_price:.2f} from {result.po.supplier}"
