"""Every SKU at a glance: its stock (the ERP's item master), its agent's active run, what that
run waits for and since when, the last outcome. Five SQL queries over Restate's state and
invocation tables and one read of the item master, however many SKUs; then sorted, searched
and filtered here, from the page's query parameters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import SkuRecord
from replenisher.domain.sku_list import FAILED_OUTCOMES
from replenisher.domain.state import State
from replenisher.operations.catalogue import Catalogue, ItemStock
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.restate.paused import PausedCall
from replenisher.timeline.build import is_outage_text
from replenisher.timeline.format import clock
from replenisher.timeline.model import Invocation, Waiting

WAITING_ON = {"wait_for_approval": "manager", "wait_for_supplier_reply": "supplier", "wait_for_goods": "supplier"}


class LastOutcome(BaseModel):
    """How a SKU's last run ended, as a line shows it."""

    run_id: str
    outcome: str
    detail: str = Field(default="", description="shortened on the SKU list (`domain.sku_list.DETAIL`)")
    ended_at: float | None = None

    @classmethod
    def of(cls, result: ReplenishmentResult) -> LastOutcome:
        return cls(run_id=result.run_id, outcome=result.outcome, detail=result.detail, ended_at=result.ended_at)


class SkuRow(BaseModel):
    sku: str
    stock: ItemStock | None = Field(default=None, description="the ERP's figures now, if it lists the SKU")
    has_agent: bool = True
    watching: bool = False
    runs: int = 0
    active_run: str | None = None
    run_status: str | None = None
    retrying: str | None = None
    waiting: Waiting | None = None
    waiting_since: float | None = None
    last_outcome: LastOutcome | None = None

    @field_validator("last_outcome", mode="before")
    @classmethod
    def _shortened(cls, value: object) -> object:
        """A run's whole result, as the agent's record keeps it, taken as what a line shows of it."""
        return LastOutcome.of(value) if isinstance(value, ReplenishmentResult) else value

    kept_messages: int = 0
    held_until: float | None = None
    asked_price: float | None = Field(default=None, description="the active run's PO price, or its best quote")
    supplier: str | None = Field(default=None, description="the active run's supplier, if it chose one")
    paused: list[PausedCall] = Field(default_factory=list, description="its calls Restate paused")

    @property
    def awaiting_approval(self) -> bool:
        return self.waiting is not None and self.waiting.tool == "wait_for_approval"

    @property
    def waiting_on(self) -> str | None:
        """Whom the active run waits for: the manager or a supplier (a reply or the goods)."""
        return WAITING_ON.get(self.waiting.tool, "someone") if self.waiting is not None else None

    def over_budget(self, budget: float | None) -> bool:
        return budget is not None and self.asked_price is not None and self.asked_price > budget

    @property
    def failing(self) -> str | None:
        """Why an on-call engineer should look: a call Restate paused, a step being retried, or a
        last run that ended without goods and without a manager's no (a rejection is a decision,
        not a failure)."""
        if self.paused:
            return f"stopped: {self.paused[0].line()}"
        if self.retrying:
            return self.retrying
        o = self.last_outcome
        if o is not None and o.outcome in FAILED_OUTCOMES and self.active_run is None:
            return f"last run {o.outcome.replace('_', ' ')}: {o.detail}"
        return None


def row_of(
    record: SkuRecord,
    waiting: dict[str, Waiting],
    invocations: dict[str, Invocation],
    since: dict[str, float],
) -> SkuRow:
    run = record.active.run_id if record.active else None
    inv = invocations.get(run) if run else None
    return SkuRow(
        sku=record.sku,
        watching=record.watch.watching,
        runs=record.runs_started,
        active_run=run,
        run_status=inv.status if inv else None,
        retrying=retrying_of(inv),
        waiting=waiting.get(run) if run else None,
        waiting_since=since.get(run) if run else None,
        last_outcome=record.last_outcome,
        kept_messages=len(record.kept) + record.kept_overflow,
        held_until=record.hold_until,
    )


def retrying_of(inv: Invocation | None) -> str | None:
    """What the run's invocation is retrying, and why, from Restate's record of it; None when nothing."""
    # An attempt after failed ones is still a retry: between attempts it shows as backing off.
    again = inv is not None and inv.status == "running" and (inv.retry_count or 0) > 1 and bool(inv.last_failure)
    if inv is None or not (inv.backing_off or again):
        return None
    tries = inv.retry_count or 1
    next_at = f", next {clock(inv.next_retry_at)[11:19]}" if inv.next_retry_at else ""
    if is_outage_text(inv.last_failure_code, inv.last_failure):
        return f"service down: {tries} attempts refused{next_at}: {inv.last_failure}"
    step = (inv.last_failure_command or "the run").rsplit(" ", 1)[0]
    return f"retrying {step}: {tries} attempts failed{next_at}; last error: {inv.last_failure}"


def asked_of(state: State | None) -> tuple[float | None, str | None]:
    return state.asked if state is not None else (None, None)


async def sku_rows(client: RestateClient, catalogue: Catalogue | None = None) -> list[SkuRow]:
    """A row for every SKU the ERP lists or an agent watches."""
    items = catalogue.items if catalogue else {}
    by_sku = {row.sku: row for row in await rows_of(client, await client.sku_records(), items)}
    for sku, item in items.items():
        by_sku.setdefault(sku, SkuRow(sku=sku, stock=item, has_agent=False))
    return list(by_sku.values())


async def rows_of(
    client: RestateClient, records: list[SkuRecord], items: Mapping[str, ItemStock] | None = None
) -> list[SkuRow]:
    """The agents' rows of these records, their active runs read from Restate, and the ERP's figures
    from `items` when given."""
    items = items or {}
    active = [r.active.run_id for r in records if r.active is not None]
    waiting = await client.waiting_runs()
    invocations = await client.run_invocations(active)
    since = await client.waiting_since({r: invocations[r].id for r in active if r in waiting and r in invocations})
    states = await client.run_states(active)
    paused: dict[str, list[PausedCall]] = {}
    for call in await client.paused():
        paused.setdefault(call.sku, []).append(call)
    rows = []
    for record in records:
        row = row_of(record, waiting, invocations, since)
        price, supplier = asked_of(states.get(row.active_run) if row.active_run else None)
        update = {"stock": items.get(record.sku), "asked_price": price, "supplier": supplier}
        rows.append(row.model_copy(update=update | {"paused": paused.get(record.sku, [])}))
    return rows


class NamePage(BaseModel):
    """A page of the agents' rows by SKU, read on its own (`agents_by_name`)."""

    rows: list[SkuRow]
    matching: int = Field(description="the agents the search chose, on every page")


async def agents_by_name(client: RestateClient, query: SkuQuery, offset: int, limit: int) -> NamePage | None:
    """The agents' rows `offset` to `offset + limit` of `query`, reading only those agents' records,
    when the query is one Restate can page: by SKU, at most a search, no filter (whose rows depend
    on every agent's run). None otherwise, and for `limit` 0 (every row): read them all then."""
    if query.sort != "sku" or query.waiting != "any" or query.flag != "all" or limit <= 0:
        return None
    page = await client.sku_records_page(query.q, query.order == "desc", limit, offset)
    return NamePage(rows=await rows_of(client, page.records), matching=page.matching)


SortKey = Literal["sku", "stock", "cover", "waiting", "outcome"]
PER_PAGE = 100


class SkuQuery(BaseModel):
    """The SKUs page's query parameters. Anything else is refused with the reason."""

    model_config = ConfigDict(extra="forbid")

    q: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9._ -]*$", description="part of a SKU")
    sort: SortKey = "sku"
    order: Literal["asc", "desc"] = "asc"
    waiting: Literal["any", "manager", "supplier", "someone", "nobody"] = "any"
    flag: Literal["all", "below-safety", "over-budget", "failing"] = "all"
    page: int = Field(default=1, ge=1, le=1_000_000, description="which page of the rows that match, from 1")
    per_page: int = Field(default=PER_PAGE, ge=10, le=500, description="rows on a page")

    @classmethod
    def parse(cls, params: dict[str, str]) -> SkuQuery:
        return parsed(cls, params)


class SkuPage(BaseModel):
    """One page of the rows a query chose, and how many there are on every filter chip."""

    rows: list[SkuRow]
    total: int = Field(description="every SKU, whatever the query")
    matching: int = Field(description="the SKUs the query chose, on every page")
    page: int
    pages: int
    first: int = Field(description="the first row shown, counted from 1 (0 when none)")
    counts: dict[str, int] = Field(description="SKUs per filter chip (CHIPS), whatever the query")

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0


Q = TypeVar("Q", bound=BaseModel)


def _sentence(message: str) -> str:
    """Pydantic's message inside ours: its first letter small, the rest (a pattern, a value) as it is."""
    return message[:1].lower() + message[1:]


def parsed(model: type[Q], params: dict[str, str]) -> Q:
    try:
        return model.model_validate(params)
    except ValidationError as e:
        reasons = []
        for err in e.errors():
            where = ".".join(str(x) for x in err["loc"]) or "query"
            if err["type"] == "extra_forbidden":
                allowed = ", ".join(model.model_fields)
                reasons.append(f"unknown parameter {where!r} (known: {allowed})")
            elif err["type"] == "literal_error":
                reasons.append(f"{where}={params.get(where, '')!r}: {_sentence(err['msg'])}")
            else:
                reasons.append(f"{where}={str(params.get(where, ''))[:80]!r}: {_sentence(err['msg'])}")
        raise OperatorError("bad query: " + "; ".join(reasons)) from None


def _sort_key(key: SortKey, now: float) -> Callable[[SkuRow], tuple[Any, ...]]:
    far = float("inf")

    def of(row: SkuRow) -> tuple[Any, ...]:
        stock = row.stock
        if key == "stock":  # the emptiest shelf relative to its safety stock first
            return (stock.on_hand / max(stock.safety_stock, 1) if stock else far, row.sku)
        if key == "cover":
            cover = stock.days_of_cover if stock else None
            return (far if cover is None else cover, row.sku)
        if key == "waiting":  # the longest wait first
            return (-(now - row.waiting_since) if row.waiting_since else far, row.sku)
        if key == "outcome":
            o = row.last_outcome
            return (o.outcome if o else "~", -(o.ended_at or 0 if o else 0), row.sku)
        return (row.sku,)

    return of


def _waits_on(row: SkuRow, waiting: str) -> bool:
    if waiting == "nobody":
        return row.waiting is None
    if waiting == "someone":
        return row.waiting is not None
    return waiting == "any" or row.waiting_on == waiting


def _flagged(row: SkuRow, flag: str, budget: float | None) -> bool:
    if flag == "below-safety":
        return row.stock is not None and row.stock.below_safety
    if flag == "over-budget":
        return row.over_budget(budget)
    if flag == "failing":
        return row.failing is not None
    return True


# The filter chips over the SKUs page: each a `waiting` or a `flag` value, counted on every SKU.
CHIPS: dict[str, tuple[str, str]] = {
    "manager": ("waiting", "manager"),
    "supplier": ("waiting", "supplier"),
    "below-safety": ("flag", "below-safety"),
    "over-budget": ("flag", "over-budget"),
    "failing": ("flag", "failing"),
}


def chip_counts(rows: list[SkuRow], budget: float | None) -> dict[str, int]:
    counts = dict.fromkeys(["all", *CHIPS], 0)
    counts["all"] = len(rows)
    for row in rows:
        for chip, (kind, value) in CHIPS.items():
            if _waits_on(row, value) if kind == "waiting" else _flagged(row, value, budget):
                counts[chip] += 1
    return counts


def select_rows(rows: list[SkuRow], query: SkuQuery, budget: float | None, now: float) -> list[SkuRow]:
    """Every row the query's search and filters choose, in its order (all pages)."""
    needle = query.q.strip().lower()
    chosen = [
        row
        for row in rows
        if (not needle or needle in row.sku.lower())
        and _waits_on(row, query.waiting)
        and _flagged(row, query.flag, budget)
    ]
    return sorted(chosen, key=_sort_key(query.sort, now), reverse=query.order == "desc")


def page_of(rows: list[SkuRow], query: SkuQuery, budget: float | None, now: float) -> SkuPage:
    """The query's page of the rows it chooses. A page past the last is refused, saying how many there are."""
    chosen = select_rows(rows, query, budget, now)
    pages = max(1, -(-len(chosen) // query.per_page))
    if query.page > pages:
        some = f"{pages} page{'s' if pages != 1 else ''}"
        raise OperatorError(
            f"bad query: page={query.page}: the {len(chosen)} SKUs that match make {some} of {query.per_page}"
        )
    start = (query.page - 1) * query.per_page
    shown = chosen[start : start + query.per_page]
    return SkuPage(
        rows=shown,
        total=len(rows),
        matching=len(chosen),
        page=query.page,
        pages=pages,
        first=start + 1 if shown else 0,
        counts=chip_counts(rows, budget),
    )
