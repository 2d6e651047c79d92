"""The world's HTTP API: routes to the simulated ERP, suppliers and manager, and nothing else.

Serve with `hypercorn simulated_world.app:app --bind 127.0.0.1:9100 -w 0`; configure with
WORLD_INGRESS_URL, WORLD_DAY_SECONDS, WORLD_CATALOGUE, and WORLD_INBOUND_URL with
WORLD_PARTY_SECRETS_FILE to push through the inbound endpoint, signed (see settings.py).
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Any, cast

import httpx
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from replenisher.domain.calendar import BusinessCalendar
from replenisher.domain.documents import (
    ApprovalReminder,
    ApprovalRequest,
    CancelRequest,
    ChaseRequest,
    PurchaseOrder,
    PurchaseOrderClosure,
    QuoteRequest,
    Sku,
    SupplierId,
)
from replenisher.inbound.signing import load_secrets
from simulated_world.calls import CallFilter, CallList, CallRecord, FirstCallQuery, Service
from simulated_world.catalogue import load
from simulated_world.clock import Clock
from simulated_world.erp import (
    BookedReceipt,
    ClosureList,
    ItemList,
    ItemSetup,
    ManualReceipt,
    ReceiptFilter,
    ReceiptList,
)
from simulated_world.errors import BadRequest, NotFound
from simulated_world.faults import SupplierFaults
from simulated_world.manager import (
    ApprovalFilter,
    ApprovalList,
    DecisionBody,
    ManagerPolicy,
    ReminderFilter,
    ReminderList,
)
from simulated_world.messenger import InboundDoor, MessageFilter, MessageList
from simulated_world.routing import JsonApp, Request, Response, Route, Router, ok
from simulated_world.settings import WorldSettings
from simulated_world.suppliers import OrderFilter, OrderList, SupplierSetup
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


def _valid_id(adapter: TypeAdapter[str], value: str, what: str) -> str:
    try:
        return adapter.validate_python(value)
    except ValidationError:
        raise BadRequest(f"{value!r} is not a valid {what}") from None


router: Router[SimulatedWorld] = Router()
route = router.route


# --- health and setup ------------------------------------------------------------------


@route("GET", "/health")
async def health(world: SimulatedWorld, req: Request) -> Response:
    return ok(Health())


@route("PUT", "/admin/suppliers/{sid}")
async def put_supplier(world: SimulatedWorld, req: Request) -> Response:
    sid = _valid_id(_supplier_id, req.path_params["sid"], "supplier id")
    return ok(world.set_supplier(sid, req.parse(SupplierSetup)).view())


@route("PUT", "/admin/items/{sku}")
async def put_item(world: SimulatedWorld, req: Request) -> Response:
    sku = _valid_id(_sku, req.path_params["sku"], "SKU")
    return ok(world.set_item(sku, req.parse(ItemSetup)))


@route("GET", "/admin/calls")
async def list_calls(world: SimulatedWorld, req: Request) -> Response:
    return ok(CallList(calls=world.calls.find(req.parse_query(CallFilter))))


@route("GET", "/admin/first-call")
async def first_call(world: SimulatedWorld, req: Request) -> Response:
    return ok(await world.calls.first(req.parse_query(FirstCallQuery)))


@route("GET", "/admin/orders")
async def list_orders(world: SimulatedWorld, req: Request) -> Response:
    return ok(OrderList(orders=world.orders(req.parse_query(OrderFilter))))


@route("GET", "/admin/messages")
async def list_messages(world: SimulatedWorld, req: Request) -> Response:
    return ok(MessageList(messages=world.messenger.find(req.parse_query(MessageFilter))))


@route("GET", "/admin/clock")
async def clock(world: SimulatedWorld, req: Request) -> Response:
    now = world.clock.now()
    return ok(
        ClockView(
            now=now,
            day_seconds=world.clock.day_seconds,
            started_at=world.clock.started_at,
            day=world.clock.day_number(now),
            calendar_now=world.clock.calendar(now),
            date=world.clock.date(now),
            calendar=world.clock.site.calendar,
        )
    )


# --- ERP -------------------------------------------------------------------------------


@route("GET", "/erp/stock/{sku}", call=("erp", "get_stock"))
async def get_stock(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.stock(req.path_params["sku"]))


@route("GET", "/erp/items", call=("erp", "list_items"))
async def list_items(world: SimulatedWorld, req: Request) -> Response:
    """The item master with every SKU's stock now: one read for a whole overview."""
    return ok(ItemList(items=world.erp.all_items(world.clock.now())))


@route("GET", "/erp/items/{sku}")
async def item_suppliers(world: SimulatedWorld, req: Request) -> Response:
    """One SKU's approved suppliers: the inbound endpoint's check of who may write about it.
    Not a call of the agent's, so not recorded among them."""
    return ok(world.erp.suppliers_of(req.path_params["sku"]))


@route("GET", "/erp/suppliers", call=("erp", "list_suppliers"))
async def list_suppliers(world: SimulatedWorld, req: Request) -> Response:
    """The supplier master: ids and names, so people read names rather than ids."""
    return ok(SupplierDirectory(suppliers=[SupplierName(id=s.id, name=s.setup.name) for s in world.suppliers.values()]))


@route("POST", "/erp/purchase-orders/{po_number}/close", call=("erp", "close_purchase_order"))
async def close_purchase_order(world: SimulatedWorld, req: Request) -> Response:
    po_number = req.path_params["po_number"]
    world.close_purchase_order(po_number, req.parse(PurchaseOrderClosure))
    return ok(Closed(po_number=po_number))


@route("GET", "/erp/goods-receipts", call=("erp", "goods_receipts"))
async def goods_receipts(world: SimulatedWorld, req: Request) -> Response:
    return ok(ReceiptList(receipts=world.erp.find_receipts(req.parse_query(ReceiptFilter))))


@route("GET", "/erp/goods-receipts/{receipt_id}", call=("erp", "goods_receipt"))
async def goods_receipt(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.erp.receipt(req.path_params["receipt_id"]))


@route("POST", "/admin/goods-receipts")
async def book_goods(world: SimulatedWorld, req: Request) -> Response:
    manual = req.parse(ManualReceipt)
    # By hand, a SKU the ERP does not list is a typo: booking it would add stock nowhere.
    if manual.sku not in world.erp.items:
        raise NotFound(f"the ERP does not list SKU {manual.sku!r}: nothing booked")
    receipt = BookedReceipt(**manual.model_dump(), booked_at=world.clock.now())
    return ok(world.erp.book_goods(receipt))


@route("GET", "/erp/closures", call=("erp", "closures"))
async def closures(world: SimulatedWorld, req: Request) -> Response:
    return ok(ClosureList(closures=world.erp.find_closures(req.parse_query(ReceiptFilter))))


# --- suppliers -------------------------------------------------------------------------


@route("POST", "/suppliers/{sid}/quotes", call=("supplier", "quote"))
async def quote(world: SimulatedWorld, req: Request) -> Response:
    supplier = world.reach_supplier(req.path_params["sid"])
    return ok(world.quote(supplier, req.parse(QuoteRequest)))


@route("GET", "/suppliers/{sid}/prices/{sku}", call=("supplier", "live_price"))
async def live_price(world: SimulatedWorld, req: Request) -> Response:
    supplier = world.reach_supplier(req.path_params["sid"])
    return ok(world.live_price(supplier, req.path_params["sku"]))


@route("POST", "/suppliers/{sid}/orders", call=("supplier", "place_order"))
async def place_order(world: SimulatedWorld, req: Request) -> Response:
    supplier = world.reach_supplier(req.path_params["sid"])
    key = req.headers.get("idempotency-key")
    if not key:
        raise BadRequest("the Idempotency-Key header is required")
    ack, created = world.place_order(supplier, key, req.parse(PurchaseOrder))
    return ok(ack, 201 if created else 200)


@route("GET", "/suppliers/{sid}/orders/{po_number}", call=("supplier", "find_order"))
async def find_order(world: SimulatedWorld, req: Request) -> Response:
    supplier = world.reach_supplier(req.path_params["sid"])
    return ok(world.find_order(supplier, req.path_params["po_number"]))


@route("POST", "/suppliers/{sid}/orders/{po_number}/chase", call=("supplier", "chase"))
async def chase(world: SimulatedWorld, req: Request) -> Response:
    supplier = world.reach_supplier(req.path_params["sid"])
    po_number = req.path_params["po_number"]
    world.chase(supplier, po_number, req.parse(ChaseRequest), req.headers.get("idempotency-key"))
    return ok(Chased(po_number=po_number))


@route("POST", "/suppliers/{sid}/orders/{po_number}/cancel", call=("supplier", "cancel"))
async def cancel(world: SimulatedWorld, req: Request) -> Response:
    supplier = world.reach_supplier(req.path_params["sid"])
    po_number = req.path_params["po_number"]
    order = world.cancel(supplier, po_number, req.parse(CancelRequest))
    return ok(Cancelled(po_number=po_number, shipped_quantity=order.shipped_quantity))


# --- manager ---------------------------------------------------------------------------


@route("POST", "/manager/approval-requests", call=("manager", "request_approval"))
async def request_approval(world: SimulatedWorld, req: Request) -> Response:
    entry, created = world.request_approval(req.parse(ApprovalRequest))
    return ok(entry, 201 if created else 200)


@route("POST", "/manager/approval-requests/{po_number}/reminders", call=("manager", "remind"))
async def remind(world: SimulatedWorld, req: Request) -> Response:
    key = req.headers.get("idempotency-key")
    if not key:
        raise BadRequest("the Idempotency-Key header is required")
    reminder = req.parse(ApprovalReminder)
    if reminder.po_number != req.path_params["po_number"]:
        raise BadRequest(f"reminder about {reminder.po_number!r} posted to {req.path_params['po_number']!r}")
    entry, created = world.manager.remind(key, reminder, world.clock.now())
    return ok(entry, 201 if created else 200)


@route("GET", "/manager/reminders", call=("manager", "list_reminders"))
async def list_reminders(world: SimulatedWorld, req: Request) -> Response:
    return ok(ReminderList(reminders=world.manager.reminders(req.parse_query(ReminderFilter))))


@route("GET", "/manager/approval-requests", call=("manager", "list_approval_requests"))
async def list_approval_requests(world: SimulatedWorld, req: Request) -> Response:
    return ok(ApprovalList(requests=world.manager.find(req.parse_query(ApprovalFilter))))


@route("POST", "/manager/approval-requests/{po_number}/decision", call=("manager", "decide"))
async def decide(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.decide(req.path_params["po_number"], req.parse(DecisionBody)))


@route("PUT", "/manager/policy", call=("manager", "set_policy"))
async def put_policy(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.set_policy(req.parse(ManagerPolicy)))


@route("GET", "/manager/policy", call=("manager", "get_policy"))
async def get_policy(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.manager.policy)


# --- fault injection -------------------------------------------------------------------


@route("PUT", "/faults/suppliers/{sid}")
async def put_faults(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.set_faults(req.path_params["sid"], req.parse(SupplierFaults)))


@route("GET", "/faults/suppliers/{sid}")
async def get_faults(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.faults_of(req.path_params["sid"]))


@route("DELETE", "/faults/suppliers/{sid}")
async def clear_faults(world: SimulatedWorld, req: Request) -> Response:
    return ok(world.clear_faults(req.path_params["sid"]))


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
    world = SimulatedWorld(
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


async def stop(world: SimulatedWorld) -> None:
    await world.aclose()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def record_call(world: SimulatedWorld, route: Route[SimulatedWorld], req: Request, status: int) -> None:
    if route.call is None:
        return
    service, op = route.call
    body = req.loose_json()
    body = body if isinstance(body, dict) else {}
    params = req.path_params
    supplier = params.get("sid") or _text(body.get("supplier"))
    po_number = params.get("po_number") or _text(body.get("po_number"))
    sku = params.get("sku") or _text(body.get("sku")) or req.query.get("sku")
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


app: JsonApp[SimulatedWorld] = JsonApp(router, startup=start, shutdown=stop, observe=record_call)
