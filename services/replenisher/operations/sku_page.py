"""The console's SKUs page from the SKU list kept by key (`domain.sku_list`): the page's rows chosen,
ordered and counted by the list, then, for those rows alone, the ERP's figures now; with the calls
Restate paused and the runs retrying a step (a SKU with either counts as failing, as on the page read
from the agents' records).

The list holds the SKUs that have an agent. It orders and filters by what each agent last read of its
stock (`below-safety`, `stock`); the page shows the ERP's figures now. `cover` is not on the list (an
agent reads no consumption): the page shows it, and orders by it only among SKUs that tie on none."""

from __future__ import annotations

from replenisher.domain.sku import run_id_of, split_run_id
from replenisher.domain.sku_list import ListEntry, ShardQuery
from replenisher.operations.catalogue import Catalogue, ErpCatalogue, ItemStock
from replenisher.operations.overview import LastOutcome, SkuPage, SkuQuery, SkuRow, retrying_of
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.restate.paused import PausedCall, RecentPaused
from replenisher.operations.restate.sku_list import filled_page
from replenisher.timeline.model import Invocation, Waiting

EVENT_OF = {"wait_for_approval": "approval", "wait_for_supplier_reply": "supplier-reply", "wait_for_goods": "goods"}


def last_outcome_of(entry: ListEntry) -> LastOutcome | None:
    """The last run's outcome: of the run before the active one, or of the last run."""
    finished = entry.runs - (1 if entry.active_run else 0)
    if entry.outcome is None or finished < 1:
        return None
    return LastOutcome(
        run_id=run_id_of(entry.sku, finished), outcome=entry.outcome, detail=entry.detail or "", ended_at=entry.ended_at
    )


def row_of_entry(entry: ListEntry, stock: ItemStock | None, paused: list[PausedCall]) -> SkuRow:
    tool = entry.waiting_tool
    waiting = None
    if tool is not None:
        deadline = entry.waiting_until if entry.waiting_until is not None else entry.waiting_since or 0.0
        waiting = Waiting(tool=tool, event=EVENT_OF.get(tool, tool), seq=0, deadline=deadline)
    return SkuRow(
        sku=entry.sku,
        stock=stock,
        watching=entry.watched,
        runs=entry.runs,
        active_run=entry.active_run,
        waiting=waiting,
        waiting_since=entry.waiting_since,
        last_outcome=last_outcome_of(entry),
        asked_price=entry.asked_price,
        supplier=entry.supplier,
        paused=paused,
    )


async def listed_page(
    client: RestateClient,
    query: SkuQuery,
    budget: float | None,
    now: float,
    erp: ErpCatalogue,
    recent: RecentPaused | None = None,
) -> tuple[SkuPage, Catalogue]:
    """The query's page from the list (filled first if it is not), with its rows' figures and calls.
    A page past the last is refused, saying how many there are. `recent`: the paused calls as a recent
    scan found them (the console's), else they are scanned for."""
    offset = (query.page - 1) * query.per_page
    # Calls Restate paused and runs retrying a step: their SKUs count as failing, as on the page from the
    # agents' records, however many SKUs.
    found = await client.troubled(recent)
    retrying = found.retrying
    paused: dict[str, list[PausedCall]] = {}
    for call in found.paused:
        paused.setdefault(call.sku, []).append(call)
    troubled = set(paused) | {split_run_id(run)[0] for run in retrying}
    asked = ShardQuery(
        q=query.q,
        sort=query.sort,
        order=query.order,
        waiting=query.waiting,
        flag=query.flag,
        budget=budget,
        now=now,
        upto=0,
        failing_too=sorted(troubled),
    )
    page, _ = await filled_page(client, asked, offset, query.per_page)
    pages = max(1, -(-page.matching // query.per_page))
    if query.page > pages:
        some = f"{pages} page{'s' if pages != 1 else ''}"
        raise OperatorError(
            f"bad query: page={query.page}: the {page.matching} SKUs that match make {some} of {query.per_page}"
        )
    skus = [entry.sku for entry in page.entries]
    catalogue = await erp.read_page(skus) if skus else Catalogue()
    rows = [_row(e, catalogue, paused, retrying) for e in page.entries]
    return (
        SkuPage(
            rows=rows,
            total=page.total,
            matching=page.matching,
            page=query.page,
            pages=pages,
            first=offset + 1 if rows else 0,
            counts={"all": page.total, **page.counts},
        ),
        catalogue,
    )


def _row(
    entry: ListEntry, catalogue: Catalogue, paused: dict[str, list[PausedCall]], retrying: dict[str, Invocation]
) -> SkuRow:
    row = row_of_entry(entry, catalogue.items.get(entry.sku), paused.get(entry.sku, []))
    inv = retrying.get(entry.active_run) if entry.active_run else None
    if inv is None:
        return row
    return row.model_copy(update={"run_status": inv.status, "retrying": retrying_of(inv)})
