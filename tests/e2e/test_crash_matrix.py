"""The crash matrix: replenishments killed with SIGKILL at every step boundary, on every path.

For every kill point the run must reach the same outcome as an undisturbed run, the world
must have seen each side effect at most once per idempotency key, and no decision that
was already journaled may be taken again.

The service kills itself at armed points (`replenisher.durable.probes`): inside a step before
its side effect, and after the side effect but before the result is journaled; waits are
interrupted from outside. restate-server is killed while a step is held in flight at such a
point (the step waits there until the test releases it), and during each wait. Every kill is
shown to have landed where it claims before the process comes back: the step is in
Restate's journal (`sys_journal`) without its result, or not there at all; after a side
effect, the world's records hold it.

The paths: the happy path (every step and decision of it), a supplier that drops its
confirmation (chase_supplier), an order whose fate is unknown (check_order_status), a manager
who never answers (cancel_purchase_order), and a run that ends unknown and is settled by its
SKU (the SKU's reconcile step, and its adoption of the found order by a new run). The
table is printed at the end.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from e2e import crash_table
from e2e.scenario import Scenario, ok
from replenisher.loop import names
from replenisher.stack.admin import Admin
from support import CRASH_POINTS, DECISION_LOG, HAPPY_PATH, RegisteredService, eventually

pytestmark = pytest.mark.e2e

STEPS = ["get_quotes", "draft_purchase_order", "request_approval", "place_order", "read_supplier_reply"]
STEPS += ["close_purchase_order"]
DECISIONS = [names.decide(0), names.decide(4)]  # the first decision, and the one that chooses to place the order
WAITS = ["wait_for_approval", "wait_for_supplier_reply", "wait_for_goods"]

SERVICE_KILLS = [(names.READ_STOCK, phase) for phase in ("before", "after")]
SERVICE_KILLS += [(step, phase) for step in STEPS + DECISIONS for phase in ("before", "after")]
SERVICE_KILLS += [(wait, "during") for wait in WAITS]

# The world's record of each step's side effect (None: the step calls nobody).
SIDE_EFFECT = {
    names.READ_STOCK: "get_stock",
    "get_quotes": "quote",
    "request_approval": "request_approval",
    "place_order": "place_order",
    "chase_supplier": "chase",
    "close_purchase_order": "close_purchase_order",
}

JSON = dict[str, Any]


# --- arming, and what Restate's journal says at the moment of a kill ---------------------------


def point(scope: str, step: str, phase: str, action: str = "kill") -> str:
    body: JSON = {"scope": scope, "step": step, "phase": phase}
    if action != "kill":
        body["action"] = action
    return json.dumps(body)


def arm(scope: str, step: str, phase: str, action: str = "kill") -> str:
    line = point(scope, step, phase, action)
    with CRASH_POINTS.open("a") as f:
        f.write(line + "\n")
    return line


def fired() -> list[str]:
    path = CRASH_POINTS.with_name(CRASH_POINTS.name + ".fired")
    return path.read_text().splitlines() if path.exists() else []


def release(line: str) -> None:
    with CRASH_POINTS.with_name(CRASH_POINTS.name + ".released").open("a") as f:
        f.write(line + "\n")


async def journaled_steps(admin: Admin, key: str) -> list[JSON]:
    """The Run commands of `key`'s invocations still in flight: each step's name and whether its
    result is journaled (a Run notification with the command's completion id)."""
    rows = await admin.asql(
        "SELECT j.id, j.entry_type, j.name, j.entry_lite_json FROM sys_journal j "
        f"JOIN sys_invocation i ON j.id = i.id WHERE i.target_service_key = '{key}' AND i.status <> 'completed' "
        "AND j.entry_type IN ('Command: Run', 'Notification: Run') ORDER BY j.index"
    )
    done = set()
    for row in rows:
        if row["entry_type"] == "Notification: Run":
            done.add((row["id"], json.loads(row["entry_lite_json"])["Notification"]["id"]["CompletionId"]))
    steps = []
    for row in rows:
        if row["entry_type"] == "Command: Run":
            completion = json.loads(row["entry_lite_json"])["Command"]["Run"]["completion_id"]
            steps.append({"name": row["name"], "completed": (row["id"], completion) in done})
    return steps


def named(rows: list[JSON], step: str) -> list[JSON]:
    return [r for r in rows if r["name"] == step or r["name"].split(" ")[0] == step]


async def not_journaled(admin: Admin, key: str, step: str) -> str:
    """Assert the step's result is not in the journal now; say what the journal shows."""
    rows = await journaled_steps(admin, key)
    entries = named(rows, step)
    assert not any(r["completed"] for r in entries), f"{step} was journaled before the kill: {entries}"
    return "started, no result" if entries else "not in the journal"


async def landed(admin: Admin, scenario: Scenario, key: str, step: str, phase: str) -> str:
    """What shows the kill came where it claims (checked while the killed process is down or held)."""
    if step == names.ADOPT:
        rows = await journaled_steps(admin, key)
        reconciled = named(rows, names.RECONCILE)
        assert reconciled and all(r["completed"] for r in reconciled), f"adopt before the lookup was journaled: {rows}"
        return "lookup journaled"
    where = await not_journaled(admin, key, step)
    op = SIDE_EFFECT.get(step)
    if op is not None:
        # Each of these steps is the only one on its path that makes this call.
        calls = ok(await scenario.world.get("/admin/calls", params={"op": op}))["calls"]
        mine = [c for c in calls if scenario.sku in (c.get("sku") or "", c.get("po_number") or "")]
        mine += [c for c in calls if c.get("supplier") == scenario.supplier and c not in mine]
        if phase == "after":
            assert mine, f"{step}:after but the world saw no {op}"
            where += f"; world saw {op}"
        else:
            assert not mine, f"{step}:before but the world already saw {op}: {mine}"
            where += f"; world saw no {op} yet"
    return where


# --- the paths -----------------------------------------------------------------------------------


@dataclass
class Path:
    """One way through a replenishment, driven the same way with or without kills."""

    name: str
    steps: list[tuple[str, str]]  # (scope, step) of the kill points it adds: scope "run" or "sku"
    outcome: str
    checked_run: int = 1
    chases: int = 0
    approvals: int = 1
    orders: int = 1
    tools: Callable[[list[str]], bool] = field(default=lambda tools: True)


def subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(t == n for t in it) for n in needle)


PATHS = {
    "happy": Path("happy", [], "received", tools=lambda tools: tools == HAPPY_PATH),
    "chase": Path(
        "chase",
        [("run", "chase_supplier")],
        "received",
        chases=1,
        tools=lambda t: (
            t.count("chase_supplier") == 1 and subsequence(["place_order", "chase_supplier", "close_purchase_order"], t)
        ),
    ),
    "recheck": Path(
        "recheck",
        [("run", "check_order_status")],
        "received",
        tools=lambda t: subsequence(["place_order", "check_order_status", "place_order", "close_purchase_order"], t),
    ),
    "cancel": Path(
        "cancel",
        [("run", "cancel_purchase_order")],
        "cancelled",
        # The manager never answers: the request is escalated to the backup approver, who
        # never answers either, so two requests for the one PO, each exactly once.
        approvals=2,
        orders=0,
        tools=lambda t: t[-2:] == ["cancel_purchase_order", "done"],
    ),
    "reconcile": Path(
        "reconcile",
        [("sku", names.RECONCILE), ("sku", names.ADOPT)],
        "received",
        checked_run=2,
        tools=lambda t: "place_order" not in t and t[-2:] == ["close_purchase_order", "done"],
    ),
}


async def check_with_retries(scenario: Scenario) -> JSON:
    """`check` under one idempotency key, re-sent while restate-server is down: one invocation."""
    key = f"crash-check-{uuid.uuid4().hex[:8]}"

    async def attempt() -> JSON:
        response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/check", headers={"idempotency-key": key})
        return ok(response)

    return await eventually(attempt, timeout=90, interval=0.5, what="check to answer")


async def drive(scenario: Scenario, path: Path, approve_after: asyncio.Task[None] | None) -> str:
    """Set the path's world up, take its run through to the end, return the po it ordered (if any)."""
    if path.name == "cancel":
        request = await scenario.pending_approval(within=40)
        return request["po_number"]
    request = await scenario.pending_approval(within=40)
    if path.name == "recheck":
        await scenario.fault(down_calls=4)  # every attempt of place_order fails before the order is sent
    if path.name == "reconcile":
        await scenario.fault(lose_reply_calls=1, down_after_order_calls=100_000)
    if approve_after is not None:
        await asyncio.wait_for(approve_after, timeout=60)
    await scenario.decide(request["po_number"], approved=True)
    if path.name == "reconcile":
        first = await scenario.outcome(f"replenish-{scenario.sku}-1", within=120)
        assert first["outcome"] == "unknown", first
        ok(await scenario.world.delete(f"/faults/suppliers/{scenario.supplier}"))
        # The SKU's reconciliation timer may have found the order first; either way run 2 follows it.
        started = await check_with_retries(scenario)
        assert started["started"] in (None, f"replenish-{scenario.sku}-2"), started
    return request["po_number"]


# Replies and goods take a few test days, so a wait lasts long enough to be interrupted. A kill
# aimed at a wait gets longer ones (seconds): on a loaded machine the short wait could end
# between the test seeing it and the kill, which then lands in the next decision (legitimately
# taken again, as it was not journaled) instead of in the wait it claims.
SHORT_WAITS = {"reply_days": 3, "lead_days": 6}
LONG_WAITS = {"reply_days": 16, "lead_days": 24}


async def set_up(scenario: Scenario, path: Path, waits: dict[str, float] = SHORT_WAITS) -> None:
    await scenario.setup(**waits)
    if path.name == "chase":
        # A reply after the chase has time to arrive however long a kill holds things up.
        await scenario.configure(supplier_reply=4, reply_after_chase=40)
        await scenario.fault(drop_replies=1)  # the confirmation is never sent: the run must chase
    if path.name == "cancel":
        await scenario.configure(approval=4)


async def run_path(
    scenario: Scenario,
    path: Path,
    crash: Callable[[], Awaitable[None]],
    approve_after_crash: bool = False,
    waits: dict[str, float] = SHORT_WAITS,
) -> tuple[JSON, str]:
    await set_up(scenario, path, waits)
    # Started first: the armed point may be inside `check` itself.
    killer = asyncio.create_task(crash())

    async def journey() -> tuple[JSON, str]:
        assert (await check_with_retries(scenario))["started"] == f"replenish-{scenario.sku}-1"
        po = await drive(scenario, path, killer if approve_after_crash else None)
        return await scenario.outcome(f"replenish-{scenario.sku}-{path.checked_run}", within=120), po

    main = asyncio.create_task(journey())
    # A kill that did not land where it claims fails the test now, not when the run times out.
    await asyncio.wait({main, killer}, return_when=asyncio.FIRST_EXCEPTION)
    if killer.done() and killer.exception() is not None:
        main.cancel()
        await killer
    outcome, po = await main
    await asyncio.wait_for(killer, timeout=60)
    return outcome, po


# --- what every run must show afterwards ---------------------------------------------------------


def decisions_of(run_id: str) -> Counter[int]:
    lines = DECISION_LOG.read_text().splitlines() if DECISION_LOG.exists() else []
    return Counter(int(turn) for rid, turn in (line.split() for line in lines) if rid == run_id)


async def duplicate_effects(scenario: Scenario, path: Path, po_number: str) -> int:
    orders = await scenario.orders()
    approvals = await scenario.approval_requests()
    closures = (await scenario.world.get("/erp/closures", params={"sku": scenario.sku})).json()["closures"]
    return (
        max(len(orders) - path.orders, 0)
        + sum(1 for o in orders if o["po_number"] != po_number)
        + sum(max(o["submissions"] - 1, 0) for o in orders)
        + sum(max(o["chases"] - path.chases, 0) for o in orders)
        + max(len(approvals) - path.approvals, 0)
        + max(len(closures) - 1, 0)
    )


async def check_run(
    scenario: Scenario,
    point: str,
    path: Path,
    outcome: JSON,
    po: str,
    redecided: int | None,
    proofs: list[str],
) -> None:
    duplicates = await duplicate_effects(scenario, path, po)
    decisions = decisions_of(outcome["run_id"])
    extra = sum(decisions.values()) - len(decisions)
    crash_table.record((point, outcome["outcome"], duplicates, extra, "; ".join(proofs)))

    turns = (await scenario.run_view(outcome["run_id"]))["state"]["history"]
    history = [t["tool"] for t in turns]
    assert outcome["outcome"] == path.outcome, f"{point}: {[(t['tool'], t['summary']) for t in turns]}"
    assert path.tools(history), f"{point}: {history}"
    assert duplicates == 0, f"{point}: a side effect happened twice"
    repeated = {turn for turn, n in decisions.items() if n > 1}
    assert repeated <= ({redecided} if redecided is not None else set()), (
        f"{point}: journaled decisions were taken again: {dict(decisions)}"
    )
    assert len(await scenario.orders()) == path.orders
    if path.name == "reconcile":
        assert outcome["adopted_from"] == f"replenish-{scenario.sku}-1"


def scope_of(scenario: Scenario, scope: str) -> str:
    return scenario.sku if scope == "sku" else f"replenish-{scenario.sku}-1"


# --- the service, SIGKILLed at armed points -------------------------------------------------------


async def revive(
    service: RegisteredService, admin: Admin, scenario: Scenario, points: list[tuple[str, str, str]]
) -> list[str]:
    """Stand in for the process supervisor: after each armed kill, show where it landed, restart."""
    proofs = []
    for key, step, phase in points:
        await eventually(lambda: not service.running, timeout=90, what=f"the service to kill itself at {step}:{phase}")
        assert fired()[-1] == point(key, step, phase), f"the last kill was not {step}:{phase}: {fired()[-1:]}"
        proofs.append(await landed(admin, scenario, key, step, phase))
        await asyncio.to_thread(service.restart)
    return proofs


@pytest.mark.parametrize(("step", "phase"), SERVICE_KILLS, ids=[f"{s}:{p}" for s, p in SERVICE_KILLS])
async def test_service_killed(
    scenario: Scenario, service: RegisteredService, admin: Admin, step: str, phase: str
) -> None:
    path = PATHS["happy"]
    proofs: list[str] = []

    async def crash() -> None:
        if phase == "during":
            await scenario.waiting_for(f"replenish-{scenario.sku}-1", step, within=60)
            service.kill()
            proofs.append(f"killed while {step} waited")
            await asyncio.to_thread(service.restart)
        else:
            proofs.extend(await revive(service, admin, scenario, [(key, step, phase)]))

    key = scenario.sku if step == names.READ_STOCK else f"replenish-{scenario.sku}-1"
    if phase != "during":
        arm(key, step, phase)
    waits = LONG_WAITS if phase == "during" else SHORT_WAITS
    outcome, po = await run_path(scenario, path, crash, approve_after_crash=step == "wait_for_approval", waits=waits)
    redecided = int(step.split()[1]) if step.startswith("decide") and phase == "after" else None
    await check_run(scenario, f"service {step}:{phase}", path, outcome, po, redecided, proofs)


OTHER_PATH_KILLS = [
    (name, phase) for name in ("chase", "recheck", "cancel", "reconcile") for phase in ("before", "after")
]


@pytest.mark.parametrize(("name", "phase"), OTHER_PATH_KILLS, ids=[f"{n}:{p}" for n, p in OTHER_PATH_KILLS])
@pytest.mark.slow
async def test_service_killed_off_the_happy_path(
    scenario: Scenario, service: RegisteredService, admin: Admin, name: str, phase: str
) -> None:
    """Every kill point the path adds is armed; they fire in turn in one run."""
    path = PATHS[name]
    points = [(scope_of(scenario, scope), step, phase) for scope, step in path.steps]
    for key, step, _ in points:
        arm(key, step, phase)
    proofs: list[str] = []

    async def crash() -> None:
        proofs.extend(await revive(service, admin, scenario, points))

    outcome, po = await run_path(scenario, path, crash)
    label = ", ".join(f"{step}:{phase}" for _, step, _ in points)
    await check_run(scenario, f"service {label} ({name})", path, outcome, po, None, proofs)


# --- restate-server, killed while a step is held in flight, and during each wait -------------------

# Held before the side effect, except place_order: held once the supplier has taken the order.
HAPPY_HOLDS = [(step, "after" if step == "place_order" else "before") for step in STEPS]
SERVER_KILLS = [("happy", step, phase) for step, phase in HAPPY_HOLDS]
SERVER_KILLS += [
    (name, step, "before") for name in ("chase", "recheck", "cancel", "reconcile") for _, step in PATHS[name].steps
]


@pytest.mark.parametrize(("name", "step", "phase"), SERVER_KILLS, ids=[f"{n}-{s}:{p}" for n, s, p in SERVER_KILLS])
async def test_restate_server_killed_inside_a_step(
    scenario: Scenario, restate_runtime: Any, admin: Admin, name: str, step: str, phase: str
) -> None:
    if not getattr(restate_runtime, "supports_crash", True):
        pytest.skip("this runtime cannot be killed and restarted on the same data (the Docker one)")
    path = PATHS[name]
    scope = next((s for s, st in path.steps if st == step), "run")
    key = scope_of(scenario, scope)
    line = arm(key, step, phase, action="hold")
    proofs: list[str] = []

    async def crash() -> None:
        await eventually(lambda: line in fired(), timeout=120, what=f"{step} to be held in flight")
        try:
            proof = await landed(admin, scenario, key, step, phase)
            if step == "place_order":
                assert len(await scenario.orders()) == 1, "held after the order, but the supplier has none"
                proof += "; the supplier holds the order"
            proofs.append(proof)
            restate_runtime.kill()
            await asyncio.to_thread(restate_runtime.restart)
        finally:
            release(line)

    outcome, po = await run_path(scenario, path, crash)
    await check_run(scenario, f"restate-server {step}:{phase} ({name})", path, outcome, po, None, proofs)


@pytest.mark.parametrize("step", WAITS)
async def test_restate_server_killed_during_a_wait(
    scenario: Scenario, restate_runtime: Any, admin: Admin, step: str
) -> None:
    if not getattr(restate_runtime, "supports_crash", True):
        pytest.skip("this runtime cannot be killed and restarted on the same data (the Docker one)")
    proofs: list[str] = []

    async def crash() -> None:
        run_id = f"replenish-{scenario.sku}-1"
        await scenario.waiting_for(run_id, step, within=60)
        rows = await admin.asql(f"SELECT status FROM sys_invocation WHERE target = 'Replenish/{run_id}/run'")
        proofs.append(f"Restate: {rows[0]['status'] if rows else '?'} in {step}")
        restate_runtime.kill()
        await asyncio.to_thread(restate_runtime.restart)

    outcome, po = await run_path(
        scenario, PATHS["happy"], crash, approve_after_crash=step == "wait_for_approval", waits=LONG_WAITS
    )
    await check_run(scenario, f"restate-server {step}:during", PATHS["happy"], outcome, po, None, proofs)
