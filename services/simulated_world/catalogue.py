"""Starting catalogues: `empty` for tests that build their own world, `demo` for the demo.

The demo is chosen to exercise the agent from the first minute: a few SKUs start below
safety stock, suppliers trade price against speed, and the manager's budget turns down
the three dearest SKUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from simulated_world.erp import ItemSetup
from simulated_world.manager import ManagerPolicy
from simulated_world.suppliers import SupplierSetup

CatalogueName = Literal["empty", "demo"]


@dataclass(frozen=True)
class Catalogue:
    suppliers: dict[str, SupplierSetup] = field(default_factory=dict)
    items: dict[str, ItemSetup] = field(default_factory=dict)
    policy: ManagerPolicy = field(default_factory=ManagerPolicy)


# name, how its price compares with the base price, lead/reply days, drift, shipments
_DEMO_SUPPLIERS: dict[str, tuple[str, float, float, float, float, int]] = {
    "acme": ("Acme Industrial Supply", 1.00, 6.0, 1.0, 0.03, 1),  # cheapest, slowest
    "bolt": ("Bolt & Nut Express", 1.12, 2.0, 0.25, 0.02, 1),  # dearest, fastest
    "cogs": ("Cogs Components", 1.05, 4.0, 0.5, 0.06, 2),  # in between, ships in halves
}

# sku, base unit price, on hand, safety stock, target stock, daily consumption, suppliers
_DEMO_ITEMS: list[tuple[str, float, int, int, int, float, tuple[str, ...]]] = [
    ("SKU-101", 4.20, 40, 50, 200, 8, ("acme", "bolt", "cogs")),  # below safety
    ("SKU-102", 12.50, 120, 60, 240, 10, ("acme", "bolt")),
    ("SKU-103", 0.85, 900, 500, 2000, 60, ("acme", "cogs")),
    ("SKU-104", 38.00, 15, 20, 80, 3, ("bolt", "cogs")),  # below safety
    ("SKU-105", 7.75, 300, 100, 400, 12, ("acme", "bolt", "cogs")),
    ("SKU-106", 145.00, 6, 8, 30, 1, ("bolt", "cogs")),  # below safety, over budget
    ("SKU-107", 2.40, 500, 250, 1000, 40, ("acme",)),
    ("SKU-108", 19.90, 70, 40, 160, 5, ("acme", "bolt")),
    ("SKU-109", 64.00, 25, 12, 50, 2, ("bolt", "cogs")),
    ("SKU-110", 0.30, 1500, 2000, 8000, 300, ("acme", "cogs")),  # below safety
    ("SKU-111", 9.10, 210, 80, 320, 9, ("bolt",)),
    ("SKU-112", 27.50, 45, 30, 120, 4, ("acme", "cogs")),
    ("SKU-113", 210.00, 3, 4, 16, 0.5, ("bolt",)),  # below safety, over budget
    ("SKU-114", 5.60, 400, 150, 600, 20, ("acme", "bolt", "cogs")),
    ("SKU-115", 15.00, 35, 40, 150, 6, ("cogs",)),  # below safety
    ("SKU-116", 88.00, 14, 10, 40, 1.5, ("acme", "bolt")),
    ("SKU-117", 3.30, 650, 300, 1200, 35, ("acme", "cogs")),
    ("SKU-118", 49.00, 22, 15, 60, 2, ("bolt", "cogs")),
    ("SKU-119", 320.00, 5, 3, 12, 0.25, ("acme", "bolt")),  # over budget once it runs low
    ("SKU-120", 11.25, 90, 60, 240, 7, ("acme", "bolt", "cogs")),
]

DEMO_BUDGET = 120.0
"""The manager's auto-approval limit per unit: SKU-106, SKU-113 and SKU-119 are above it."""


def demo() -> Catalogue:
    suppliers = {}
    for sid, (name, markup, lead, reply, drift, deliveries) in _DEMO_SUPPLIERS.items():
        prices = {sku: round(base * markup, 2) for sku, base, *_, carriers in _DEMO_ITEMS if sid in carriers}
        suppliers[sid] = SupplierSetup(
            name=name,
            prices=prices,
            lead_days=lead,
            reply_days=reply,
            price_drift=drift,
            deliveries=deliveries,
        )
    items = {
        sku: ItemSetup(
            on_hand=on_hand,
            safety_stock=safety,
            target_stock=target,
            daily_consumption=consumption,
            suppliers=list(carriers),
        )
        for sku, _, on_hand, safety, target, consumption, carriers in _DEMO_ITEMS
    }
    policy = ManagerPolicy(auto_approve=True, max_unit_price=DEMO_BUDGET, delay_days=0.5, over_budget="reject")
    return Catalogue(suppliers=suppliers, items=items, policy=policy)


def load(name: CatalogueName) -> Catalogue:
    return demo() if name == "demo" else Catalogue()
