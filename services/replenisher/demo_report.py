"""The demo's last screen, from what the world recorded and what the agents kept: pure, so it is tested
over a recorded result without running the demo.

It says in full sentences which faults the agents met, picks one run that met a fault to show
as a timeline (an order found again after its answer was lost, else one that was chased, else
one whose calls failed), and ends with the commands to look further.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from replenisher.domain.sku import SkuRecord, split_run_id


class WorldCall(BaseModel):
    """One row of the world's `/admin/calls`, the fields the report reads."""

    model_config = ConfigDict(extra="ignore")

    service: str
    op: str
    supplier: str | None = None
    sku: str | None = None
    po_number: str | None = None
    status: int


class WorldOrder(BaseModel):
    """One row of the world's `/admin/orders`, the fields the report reads."""

    model_config = ConfigDict(extra="ignore")

    supplier: str
    po_number: str
    sku: str


def plural(n: int, singular: str, plural_form: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural_form or singular + 's')}"


@dataclass(frozen=True)
class FaultTally:
    failed_calls: int
    """Supplier calls answered with a 5xx, each retried by the agent."""
    lost_answers: list[str]
    """POs a supplier took while the answer to the order was lost (found again by PO number)."""
    chased: list[str]
    """POs the agents chased, in the order first chased."""
    chases: int
    orders: int
    twice_ordered: list[str]
    """PO numbers held by suppliers more than once: must stay empty."""
    failed_pos: list[str]
    """POs named by a failed supplier call, in the order they failed."""

    @classmethod
    def from_world(cls, calls: list[dict[str, Any]], orders: list[dict[str, Any]]) -> FaultTally:
        seen = [WorldCall.model_validate(c) for c in calls]
        held = [WorldOrder.model_validate(o) for o in orders]
        held_pos = {(o.supplier, o.po_number) for o in held}
        failed = [c for c in seen if c.service == "supplier" and c.status >= 500]
        # An order whose answer was lost: the POST failed, yet the supplier holds the PO.
        lost = _distinct(
            c.po_number
            for c in failed
            if c.op == "place_order" and c.po_number and (c.supplier, c.po_number) in held_pos
        )
        chase_calls = [c for c in seen if c.op == "chase" and c.status < 400]
        per_po = Counter(o.po_number for o in held)
        return cls(
            failed_calls=len(failed),
            lost_answers=lost,
            chased=_distinct(c.po_number for c in chase_calls if c.po_number),
            chases=len(chase_calls),
            orders=len(held),
            twice_ordered=sorted(po for po, n in per_po.items() if n > 1),
            failed_pos=_distinct(c.po_number for c in failed if c.po_number),
        )

    def sentences(self) -> list[str]:
        out = []
        if self.failed_calls:
            were = "was" if self.failed_calls == 1 else "were"
            out.append(f"{plural(self.failed_calls, 'supplier call')} failed and {were} retried with backoff.")
        else:
            out.append("No supplier call failed.")
        if self.lost_answers:
            n = len(self.lost_answers)
            out.append(
                f"{plural(n, 'order was', 'orders were')} taken by the supplier while the answer was lost; "
                f"the agent found {'it' if n == 1 else 'them'} again by PO number and ordered nothing twice."
            )
        if self.chases:
            n = len(self.chased)
            out.append(
                f"The agents sent {plural(self.chases, 'chase')} about {plural(n, 'order')} "
                "that a supplier had not confirmed."
            )
        held = f"Suppliers hold {plural(self.orders, 'order')}"
        if self.twice_ordered:
            out.append(f"{held}, and these POs were ordered more than once: {', '.join(self.twice_ordered)}.")
        else:
            out.append(f"{held}, none of them twice.")
        return out


def _distinct(values: Any) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


@dataclass(frozen=True)
class FaultedRun:
    sku: str
    run_id: str
    met: str
    """What went wrong in it, as the end of a sentence."""

    @property
    def number(self) -> int:
        return int(split_run_id(self.run_id)[1])


def faulted_run(tally: FaultTally, records: dict[str, SkuRecord]) -> FaultedRun | None:
    """The run to show: one whose order's answer was lost, else one that was chased, else one whose calls failed."""
    by_po = {o.po_number: o for r in records.values() for o in r.outcomes if o.po_number}
    for pos, met in (
        (tally.lost_answers, "the answer to its order was lost, and it found the order again by PO number"),
        (tally.chased, "its supplier did not confirm the order, and it chased"),
        (tally.failed_pos, "a supplier call failed, and it retried"),
    ):
        for po in pos:
            if po in by_po:
                return FaultedRun(by_po[po].sku, by_po[po].run_id, met)
    return None


def inspection_help(ingress_url: str, admin_url: str, world_url: str, restate_cli: str, run: FaultedRun | None) -> str:
    sku, number = (run.sku, run.number) if run else ("SKU-101", 1)
    commands = [
        (f".venv/bin/replenisher status {sku}", "the SKU's record: runs, outcomes, what it remembers"),
        (f".venv/bin/replenisher timeline {sku} --run {number}", "that run's timeline (--html FILE draws it)"),
        (".venv/bin/replenisher cost", "what each SKU bought and what its model calls cost"),
        (".venv/bin/replenisher console", "the web console at http://127.0.0.1:8090 (inbox, SKUs, spend)"),
        (
            ".venv/bin/replenisher console --people deploy/people.demo.toml",
            "the same with sign-in: paul / paul-demo-passphrase approves",
        ),
        (f"curl '{world_url}/admin/calls?sku={sku}'", "every call the world got about the SKU"),
        (f"curl {ingress_url}/SkuAgent/{sku}/status", "the same record, straight from Restate's ingress"),
        (f"{restate_cli} invocations list --all", "every invocation Restate holds"),
        (f"{restate_cli} kv get SkuAgent {sku}", "the SKU agent's stored state"),
    ]
    width = max(len(c) for c, _ in commands)
    lines = [f"  {c.ljust(width)}  # {why}" for c, why in commands]
    return "\n".join(
        [
            "The stack is still up, so you can look around:",
            *lines,
            f"Restate's UI is at {admin_url}/ui. Set RESTATE_ADMIN_URL={admin_url} if the restate CLI asks "
            "where the server is.",
            "The demo's calendar runs on fast while the stack is up, and the console's spend page counts back",
            "from its today: within minutes the demo's orders lie beyond the periods it shows.",
            "`replenisher cost` shows what was bought whatever the date.",
            "Stop the stack with `make down`.",
        ]
    )


def last_screen(table: str, tally: FaultTally, run: FaultedRun | None, timeline: str | None, help_text: str) -> str:
    """The outcome table, the faults in sentences, one faulted run's timeline, then the commands."""
    parts = [table, "\n".join(["Faults met:", *(f"  {line}" for line in tally.sentences())])]
    if run is None:
        parts.append("No finished run met a fault this time, so there is no timeline to show.")
    else:
        parts.append(f"One run that met a fault: in {run.run_id}, {run.met}. Its timeline:")
        parts.append(
            timeline or f"(the timeline could not be read; try `replenisher timeline {run.sku} --run {run.number}`)"
        )
    parts.append(help_text)
    return "\n\n".join(parts) + "\n"
