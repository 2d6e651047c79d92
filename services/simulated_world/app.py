"""The world's HTTP API on FastAPI: routes to the simulated ERP, suppliers and manager, and nothing else.

Serve with `hypercorn simulated_world.app:app --bind 127.0.0.1:9100 -w 0`; configure with
WORLD_INGRESS_URL, WORLD_DAY_SECONDS, WORLD_CATALOGUE, and WORLD_INBOUND_URL with
WORLD_PARTY_SECRETS_FILE to push through the inbound endpoint, signed (see settings.py).
Its OpenAPI schema is served at /openapi.json; docs/world-api.md is checked against it
(tests/world/test_world_api_docs.py). Refusals keep the world's own shape, `{"error": reason}`
(routing.py), and JSON bodies are read strictly.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import httpx
from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request, Response
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from replenisher.domain.calendar import BusinessCalendar
from replenisher.domain.documents import (
    ApprovalReminder,
    ApprovalRequest,
    CancelRequest,
    ChaseRequest,
    LivePrice,
    OrderAck,
    PurchaseOrder,
    PurchaseOrderClosure,
    Quote,
    QuoteRequest,
    Sku,
    StockLevel,
    SupplierId,
)
from replenisher.inbound.signing import load_secrets
from simulated_world.calls import CallFilter, CallList, CallRecord, FirstCall, FirstCallQuery, Service
from simulated_world.catalogue import load
from simulated_world.clock import Clock
from simulated_world.erp import (
    BookedReceipt,
    ClosureList,
    ItemList,
    ItemSetup,
    ItemSuppliers,
    ManualReceipt,
    ReceiptFilter,
    ReceiptList,
)
from simulated_world.errors import BadRequest, NotFound, Unavailable
from simulated_world.faults import SupplierFaults
from simulated_world.manager import (
    ApprovalEntry,
    ApprovalFilter,
    ApprovalList,
    DecisionBody,
    ManagerPolicy,
    ReminderEntry,
    ReminderFilter,
    ReminderList,
)
from simulated_world.messenger import InboundDoor, MessageFilter, MessageList
from simulated_world.routing import (
    Envelope,
    ErrorBody,
    Scope,
    StrictJsonRoute,
    install_error_handlers,
    loose_json,
    refusal,
)
from simulated_world.settings import WorldSettings
from simulated_world.suppliers import OrderFilter, OrderList, Supplier, SupplierSetup, SupplierView
from simulated_world.world import SimulatedWorld

log = logging.getLogger(__name__)

PUSH_TIMEOUT = httpx.Timeout(10.0, connect=3.0)


class Health(BaseModel):
    ok: bool = True


class SupplierName(BaseModel):
    id: str
    name: str


class SupplierDirectory(BaseModel):
    suppliers: list[SupplierName]


class ClockView(BaseModel):
    now: float
    day_seconds: float
    started_at: float
    day: int
    calendar_now: float
    date: str
    calendar: BusinessCalendar = Field(description="the site's calendar suppliers count business days on")


class Closed(BaseModel):
    closed: bool = True
    po_number: str


class Chased(BaseModel):
    chased: bool = True
    po_number: str


class Cancelled(BaseModel):
    cancelled: bool = True
    po_number: str
    shipped_quantity: int


_sku = TypeAdapter(Sku)
_supplier_id = TypeAdapter(SupplierId)

M = TypeVar("M", bound=BaseModel)


def _valid_id(adapter: TypeAdapter[str], value: str, what: str) -> str:
    try:
        return adapter.validate_python(value)
    except ValidationError:
        raise BadRequest(f"{value!r} is not a valid {what}") from None


def the_world(request: Request) -> SimulatedWorld:
    world: SimulatedWorld | None = getattr(request.app.state, "world", None)
    if world is None:
        raise Unavailable("the world is not started")
    return world


World = Annotated[SimulatedWorld, Depends(the_world)]


class SupplierRoute(StrictJsonRoute):
    """A supplier's endpoint: an unknown supplier (404) or one that is down (503) answers so before
    it looks at the request, and a refused request changes nothing."""

    async def before_body(self, request: Request) -> None:
        request.state.supplier = the_world(request).reach_supplier(request.path_params["sid"])


def reached(request: Request, sid: str) -> Supplier:
    """The supplier `SupplierRoute` reached (`sid` named here so the schema lists it)."""
    supplier: Supplier = request.state.supplier
    return supplier


Reached = Annotated[Supplier, Depends(reached)]
IdempotencyKey = Annotated[str | None, Header(alias="idempotency-key")]

RECORDED: dict[Callable[..., Any], tuple[Service, str]] = {}
"""The routes whose calls are the agent's, recorded in the call log (`/admin/calls`) as (service, operation)."""


def recorded(service: Service, op: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(endpoint: Callable[..., Any]) -> Callable[..., Any]:
        RECORDED[endpoint] = (service, op)
        return endpoint

    return mark


REFUSED: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "refused, with the reason: bad input 400, unknown 404, conflict 409"},
    "5XX": {"model": ErrorBody, "description": "a supplier that is down or lost its answer (503)"},
}
CREATED = "201 when new; a repeat is answered 200 with the first one"

router = APIRouter(route_class=StrictJsonRoute, responses=REFUSED)
suppliers = APIRouter(route_class=SupplierRoute, responses=REFUSED, tags=["suppliers"])

# Path parameters are whole segments, `%2F` inside one decoded (routing.SegmentConvertor).
SID = "{sid:segment}"
SKU = "{sku:segment}"
MAX_ITEMS_ASKED = 100  # SKUs one read of the item master may name (`/erp/items?sku=`): a page's worth
PO = "{po_number:segment}"


# --- health and setup ------------------------------------------------------------------


@router.get("/health", tags=["admin"])
async def health() -> Health:
    return Health()


@router.put(f"/admin/suppliers/{SID}", tags=["admin"])
async def put_supplier(world: World, sid: str, setup: SupplierSetup) -> SupplierView:
    sid = _valid_id(_supplier_id, sid, "supplier id")
    return world.set_supplier(sid, setup).view()


@router.put(f"/admin/items/{SKU}", tags=["admin"])
async def put_item(world: World, sku: str, setup: ItemSetup) -> StockLevel:
    sku = _valid_id(_sku, sku, "SKU")
    return world.set_item(sku, setup)


@router.get("/admin/calls", tags=["admin"])
async def list_calls(world: World, where: Annotated[CallFilter, Query()]) -> CallList:
    return CallList(calls=world.calls.find(where))


@router.get("/admin/first-call", tags=["admin"])
async def first_call(world: World, query: Annotated[FirstCallQuery, Query()]) -> FirstCall:
    return await world.calls.first(query)


@router.get("/admin/orders", tags=["admin"])
async def list_orders(world: World, where: Annotated[OrderFilter, Query()]) -> OrderList:
    return OrderList(orders=world.orders(where))


@router.get("/admin/messages", tags=["admin"])
async def list_messages(world: World, where: Annotated[MessageFilter, Query()]) -> MessageList:
    return MessageList(messages=world.messenger.find(where))


@router.get("/admin/clock", tags=["admin"])
async def clock(world: World) -> ClockView:
    now = world.clock.now()
    return ClockView(
        now=now,
        day_seconds=world.clock.day_seconds,
        started_at=world.clock.started_at,
        day=world.clock.day_number(now),
        calendar_now=world.clock.calendar(now),
        date=world.clock.date(now),
        calendar=world.clock.site.calendar,
    )


# --- ERP -------------------------------------------------------------------------------


@router.get(f"/erp/stock/{SKU}", tags=["erp"])
@recorded("erp", "get_stock")
async def get_stock(world: World, sku: str) -> StockLevel:
    return world.stock(sku)


@router.get("/erp/items", tags=["erp"])
@recorded("erp", "list_items")
async def list_items(
    world: World, sku: Annotated[list[Sku] | None, Query(max_length=MAX_ITEMS_ASKED)] = None
) -> ItemList:
    """The item master with every SKU's stock now: one read for a whole overview; with `sku=` (up to
    100 times), only those SKUs' (one it does not list is left out), for a page of them."""
    return ItemList(items=world.erp.all_items(world.clock.now(), sku))


@router.get(f"/erp/items/{SKU}", tags=["erp"])
async def item_suppliers(world: World, sku: str) -> ItemSuppliers:
    """One SKU's approved suppliers: the inbound endpoint's check of who may write about it.
    Not a call of the agent's, so not recorded among them."""
    return world.erp.suppliers_of(sku)


@router.get("/erp/suppliers", tags=["erp"])
@recorded("erp", "list_suppliers")
async def list_suppliers(world: World) -> SupplierDirectory:
    """The supplier master: ids and names, so people read names rather than ids."""
    return SupplierDirectory(suppliers=[SupplierName(id=s.id, name=s.setup.name) for s in world.suppliers.values()])


@router.post(f"/erp/purchase-orders/{PO}/close", tags=["erp"])
@recorded("erp", "close_purchase_order")
async def close_purchase_order(world: World, po_number: str, closure: PurchaseOrderClosure) -> Closed:
    world.close_purchase_order(po_number, closure)
    return Closed(po_number=po_number)


@router.get("/erp/goods-receipts", tags=["erp"])
@recorded("erp", "goods_receipts")
async def goods_receipts(world: World, where: Annotated[ReceiptFilter, Query()]) -> ReceiptList:
    return ReceiptList(receipts=world.erp.find_receipts(where))


@router.get("/erp/goods-receipts/{receipt_id:segment}", tags=["erp"])
@recorded("erp", "goods_receipt")
async def goods_receipt(world: World, receipt_id: str) -> BookedReceipt:
    return world.erp.receipt(receipt_id)


@router.post("/admin/goods-receipts", tags=["admin"])
async def book_goods(world: World, manual: ManualReceipt) -> BookedReceipt:
    # By hand, a SKU the ERP does not list is a typo: booking it would add stock nowhere.
    if manual.sku not in world.erp.items:
        raise NotFound(f"the ERP does not list SKU {manual.sku!r}: nothing booked")
    receipt = BookedReceipt(**manual.model_dump(), booked_at=world.clock.now())
    return world.erp.book_goods(receipt)


@router.get("/erp/closures", tags=["erp"])
@recorded("erp", "closures")
async def closures(world: World, where: Annotated[ReceiptFilter, Query()]) -> ClosureList:
    return ClosureList(closures=world.erp.find_closures(where))


# --- suppliers -------------------------------------------------------------------------
# A faulty supplier may answer a quote or an acknowledgement with crafted fields (faults.py):
# those go out as given, unvalidated, hence the `| dict[str, Any]`.


@suppliers.post(f"/suppliers/{SID}/quotes")
@recorded("supplier", "quote")
async def quote(world: World, supplier: Reached, request: QuoteRequest) -> Quote | dict[str, Any]:
    return world.quote(supplier, request)


@suppliers.get(f"/suppliers/{SID}/prices/{SKU}")
@recorded("supplier", "live_price")
async def live_price(world: World, supplier: Reached, sku: str) -> LivePrice:
    return world.live_price(supplier, sku)


@suppliers.post(f"/suppliers/{SID}/orders", responses={201: {"description": CREATED}})
@recorded("supplier", "place_order")
async def place_order(
    world: World, supplier: Reached, po: PurchaseOrder, response: Response, key: IdempotencyKey = None
) -> OrderAck | dict[str, Any]:
    if not key:
        raise BadRequest("the Idempotency-Key header is required")
    ack, created = world.place_order(supplier, key, po)
    response.status_code = 201 if created else 200
    return ack


@suppliers.get(f"/suppliers/{SID}/orders/{PO}")
@recorded("supplier", "find_order")
async def find_order(world: World, supplier: Reached, po_number: str) -> OrderAck | dict[str, Any]:
    return world.find_order(supplier, po_number)


@suppliers.post(f"/suppliers/{SID}/orders/{PO}/chase")
@recorded("supplier", "chase")
async def chase(
    world: World, supplier: Reached, po_number: str, request: ChaseRequest, key: IdempotencyKey = None
) -> Chased:
    world.chase(supplier, po_number, request, key)
    return Chased(po_number=po_number)


@suppliers.post(f"/suppliers/{SID}/orders/{PO}/cancel")
@recorded("supplier", "cancel")
async def cancel(world: World, supplier: Reached, po_number: str, request: CancelRequest) -> Cancelled:
    order = world.cancel(supplier, po_number, request)
    return Cancelled(po_number=po_number, shipped_quantity=order.shipped_quantity)


# --- manager ---------------------------------------------------------------------------


@router.post("/manager/approval-requests", tags=["manager"], responses={201: {"description": CREATED}})
@recorded("manager", "request_approval")
async def request_approval(world: World, request: ApprovalRequest, response: Response) -> ApprovalEntry:
    entry, created = world.request_approval(request)
    response.status_code = 201 if created else 200
    return entry


@router.post(f"/manager/approval-requests/{PO}/reminders", tags=["manager"], responses={201: {"description": CREATED}})
@recorded("manager", "remind")
async def remind(
    world: World, po_number: str, reminder: ApprovalReminder, response: Response, key: IdempotencyKey = None
) -> ReminderEntry:
    if not key:
        raise BadRequest("the Idempotency-Key header is required")
    if reminder.po_number != po_number:
        raise BadRequest(f"reminder about {reminder.po_number!r} posted to {po_number!r}")
    entry, created = world.manager.remind(key, reminder, world.clock.now())
    response.status_code = 201 if created else 200
    return entry


@router.get("/manager/reminders", tags=["manager"])
@recorded("manager", "list_reminders")
async def list_reminders(world: World, where: Annotated[ReminderFilter, Query()]) -> ReminderList:
    return ReminderList(reminders=world.manager.reminders(where))


@router.get("/manager/approval-requests", tags=["manager"])
@recorded("manager", "list_approval_requests")
async def list_approval_requests(world: World, where: Annotated[ApprovalFilter, Query()]) -> ApprovalList:
    return ApprovalList(requests=world.manager.find(where))


@router.post(f"/manager/approval-requests/{PO}/decision", tags=["manager"])
@recorded("manager", "decide")
async def decide(world: World, po_number: str, body: DecisionBody) -> ApprovalEntry:
    return world.decide(po_number, body)


@router.put("/manager/policy", tags=["manager"])
@recorded("manager", "set_policy")
async def put_policy(world: World, policy: ManagerPolicy) -> ManagerPolicy:
    return world.set_policy(policy)


@router.get("/manager/policy", tags=["manager"])
@recorded("manager", "get_policy")
async def get_policy(world: World) -> ManagerPolicy:
    return world.manager.policy


# --- fault injection -------------------------------------------------------------------


@router.put(f"/faults/suppliers/{SID}", tags=["faults"])
async def put_faults(world: World, sid: str, faults: SupplierFaults) -> SupplierFaults:
    return world.set_faults(sid, faults)


@router.get(f"/faults/suppliers/{SID}", tags=["faults"])
async def get_faults(world: World, sid: str) -> SupplierFaults:
    return world.faults_of(sid)


@router.delete(f"/faults/suppliers/{SID}", tags=["faults"])
async def clear_faults(world: World, sid: str) -> SupplierFaults:
    return world.clear_faults(sid)


# --- lifecycle -------------------------------------------------------------------------


def trusted(ca_file: Path | None) -> ssl.SSLContext | bool:
    """The system's certificates, and `ca_file`'s besides when given."""
    if ca_file is None:
        return True
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=str(ca_file))
    return context


async def start() -> SimulatedWorld:
    settings = WorldSettings.from_env()
    door = None
    if settings.inbound_url is not None and settings.party_secrets_file is not None:
        door = InboundDoor(str(settings.inbound_url), load_secrets(settings.party_secrets_file))
    world = SimulatedWorld.over_http(
        Clock(
            settings.day_seconds,
            wall_origin=settings.clock_wall_origin,
            calendar_origin=settings.clock_calendar_origin,
            calendar=settings.calendar,
        ),
        httpx.AsyncClient(timeout=PUSH_TIMEOUT, verify=trusted(settings.inbound_ca_file)),
        str(settings.ingress_url),
        door,
    )
    catalogue = load(settings.catalogue)
    for sid, supplier in catalogue.suppliers.items():
        world.set_supplier(sid, supplier)
    for sku, item in catalogue.items.items():
        world.set_item(sku, item)
    world.set_policy(catalogue.policy)
    log.info(
        "world started: catalogue=%s day_seconds=%s pushes to %s",
        settings.catalogue,
        settings.day_seconds,
        f"inbound {settings.inbound_url} (signed)" if door else f"ingress {settings.ingress_url}",
    )
    return world


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.world = await start()
    try:
        yield
    finally:
        world, app.state.world = app.state.world, None
        await world.aclose()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def record_call(scope: Scope, body: bytes, query: dict[str, str], status: int) -> None:
    """One of the agent's calls into the call log, with the status it got; other routes, and
    requests that matched no route or not its method, are not recorded."""
    route, app = scope.get("route"), scope.get("app")
    world: SimulatedWorld | None = getattr(getattr(app, "state", None), "world", None)
    call = RECORDED.get(getattr(route, "endpoint", None))  # type: ignore[arg-type]
    if world is None or call is None or scope["method"] not in getattr(route, "methods", ()):
        return
    service, op = call
    loose = loose_json(body)
    loose = loose if isinstance(loose, dict) else {}
    params: dict[str, str] = scope.get("path_params", {})
    supplier = params.get("sid") or _text(loose.get("supplier"))
    po_number = params.get("po_number") or _text(loose.get("po_number"))
    sku = params.get("sku") or _text(loose.get("sku")) or query.get("sku")
    if sku is None and supplier is not None and po_number is not None:
        # A lookup or chase names only the PO: the SKU is that of the order the supplier holds,
        # so `/admin/calls?sku=` finds every call about the SKU's orders.
        sku = world.sku_of_order(supplier, po_number)
    world.calls.record(
        CallRecord(
            at=world.clock.now(),
            service=cast(Service, service),
            op=op,
            supplier=supplier,
            sku=sku,
            po_number=po_number,
            status=status,
        )
    )


def create_app() -> FastAPI:
    api = FastAPI(
        title="The simulated world",
        summary="ERP, suppliers and manager the replenisher calls; admin and fault endpoints to set a scenario up",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    api.include_router(router)
    api.include_router(suppliers)
    install_error_handlers(api, [*router.routes, *suppliers.routes])

    async def unhandled(request: Request, exc: Exception) -> Response:
        return refusal(500, f"internal error: {type(exc).__name__}")

    api.add_exception_handler(Exception, unhandled)
    return api


api = create_app()
"""The FastAPI app (its schema: `api.openapi()`, served at /openapi.json)."""
app = Envelope(api, record_call)
"""What hypercorn serves: the FastAPI app inside the world's envelope (routing.Envelope)."""
