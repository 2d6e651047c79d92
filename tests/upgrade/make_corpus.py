"""Make the upgrade check's corpus: Restate data with runs waiting at every kind of wait, by this code.

    make upgrade-corpus        # writes tests/fixtures/upgrade/corpus.tar.gz (about half a minute)

A private stack (restate-server, the simulated world, the service; free ports, a temporary dir)
runs five replenishments waiting at each kind of wait, and SKU agents in each state, on a compressed
clock of `DAY_SECONDS` per business day that starts on a Monday:

- approval: the manager has not answered (window `APPROVAL_WAIT_DAYS`, first reminder far off);
- reminder: the manager was reminded and has still not answered (a 300-day window: reminded at 3 days);
- escalation: the manager's window lapsed and the backup approver is asked (a 20-day window);
- supplier reply: the order is placed and the supplier has not confirmed it;
- goods: the supplier confirmed and the goods are not in yet;
- unknown order: the order was taken but its answer lost and the supplier is down since, so the
  run re-checks the order's status (or, once it gave up, the SKU holds it to reconcile);
- SKU agents watching with nothing to buy, resting after a rejected order, and unwatched.

Then the stack stops and the archive gets Restate's base dir (`restate-data/`, without RocksDB's
own info logs) and `upgrade-corpus.json`: the Restate version and the service's settings, which the
check gives the candidate (a run journals what its code computed from them).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, "", "tests.upgrade"):  # `python -m tests.upgrade.make_corpus`: the suite's helpers
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e.scenario import Scenario, ok
from replenisher.loop import names
from replenisher.stack.admin import Admin, register_deployment
from replenisher.stack.install import RESTATE_VERSION
from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import RestatePorts, free_port, port_is_free
from replenisher.stack.processes import AsgiApp, HypercornApp, RestateServer, service_server
from replenisher.upgrade.corpus import DATA, MANIFEST, NODE_NAME, CorpusManifest
from support import REPO_ROOT, eventually

CORPUS = REPO_ROOT / "tests" / "fixtures" / "upgrade" / "corpus.tar.gz"
PER_KIND = 6
DAY_SECONDS = 2.0
# Monday 5 January 2026, 00:00 UTC: business days count from the clock's start.
CALENDAR_ORIGIN = "2026-01-05T00:00:00+00:00"
APPROVAL_WAIT_DAYS = 3000
REMINDERS = "0.01,0.5"
BACKUP = "backup-approver"


def service_settings(wall_origin: float) -> dict[str, str]:
    """The service's settings for the corpus (the world's URL aside): recorded in the manifest."""
    return {
        "REPLENISHER_DAY_SECONDS": f"{DAY_SECONDS:g}",
        "REPLENISHER_CLOCK_WALL_ORIGIN": repr(wall_origin),
        "REPLENISHER_CLOCK_CALENDAR_ORIGIN": CALENDAR_ORIGIN,
        "REPLENISHER_CHECK_INTERVAL_DAYS": "3000",
        "REPLENISHER_STEP_INITIAL_RETRY_MS": "100",
        "REPLENISHER_STEP_MAX_RETRY_MS": "500",
        "REPLENISHER_STEP_MAX_ATTEMPTS": "3",
        "REPLENISHER_APPROVAL_WAIT_DAYS": str(APPROVAL_WAIT_DAYS),
        "REPLENISHER_REPLY_WAIT_DAYS": "3000",
        "REPLENISHER_GOODS_GRACE_DAYS": "3000",
        "REPLENISHER_APPROVAL_REMINDERS": REMINDERS,
        "REPLENISHER_CODE_VERSION": "corpus",
    }


def world_settings(ingress_url: str, wall_origin: float) -> dict[str, str]:
    return {
        "WORLD_INGRESS_URL": ingress_url,
        "WORLD_DAY_SECONDS": f"{DAY_SECONDS:g}",
        "WORLD_CLOCK_WALL_ORIGIN": repr(wall_origin),
        "WORLD_CLOCK_CALENDAR_ORIGIN": CALENDAR_ORIGIN,
    }


# Every call of a run's or a SKU's read handlers is an invocation Restate journals and logs, and the
# corpus would keep them all: the waits below read the world's records, and Restate's state by SQL.
ADMIN: list[Admin] = []


async def _state(service: str, key: str, name: str) -> Any:
    rows = await ADMIN[0].asql(
        f"SELECT value_utf8 FROM state WHERE service_name = '{service}' AND service_key = '{key}' AND key = '{name}'"
    )
    return json.loads(rows[0]["value_utf8"]) if rows else None


async def _waiting(s: Scenario, run: str, tool: str, approver: str | None = None) -> None:
    async def waits() -> bool:
        waiting = await _state("Replenish", run, names.WAITING)
        if not (waiting and waiting["tool"] == tool):
            return False
        return approver is None or (await _state("Replenish", run, names.STATE))["approval"]["approver"] == approver

    await eventually(waits, timeout=90, what=f"{run} to {tool}")


async def _sku(s: Scenario) -> dict[str, Any]:
    return dict(await _state("SkuAgent", s.sku, names.SKU_RECORD) or {})


async def _approved(s: Scenario, run: str, wait: str) -> None:
    await s.decide((await s.pending_approval(within=60))["po_number"], approved=True)
    await _waiting(s, run, wait)


async def _started(s: Scenario, *, approval: float | None = None, **setup: Any) -> str:
    await s.setup(**setup)
    if approval is not None:
        await s.configure(approval=approval)
    started = (await s.check())["started"]
    assert started, f"{s.sku} started no run"
    return str(started)


async def waiting_for_approval(s: Scenario) -> None:
    run = await _started(s)
    await s.pending_approval(within=60)
    await _waiting(s, run, "wait_for_approval")


async def reminded(s: Scenario) -> None:
    run = await _started(s, approval=300)
    po = (await s.pending_approval(within=60))["po_number"]

    async def reminder() -> bool:
        body = ok(await s.world.get("/manager/reminders", params={"po_number": po}))
        return bool(body["reminders"])

    await eventually(reminder, timeout=60, what=f"a reminder for {po}")
    await _waiting(s, run, "wait_for_approval")


async def escalated(s: Scenario) -> None:
    run = await _started(s, approval=20)

    async def asked() -> bool:
        return any(r["request"]["approver"] == BACKUP for r in await s.approval_requests())

    await eventually(asked, timeout=90, what=f"the backup approver to be asked for {run}")
    await _waiting(s, run, "wait_for_approval", approver=BACKUP)


async def supplier_reply(s: Scenario) -> None:
    run = await _started(s, reply_days=365)
    await _approved(s, run, "wait_for_supplier_reply")


async def goods(s: Scenario) -> None:
    run = await _started(s, reply_days=0.5, lead_days=365)
    await _approved(s, run, "wait_for_goods")


async def unknown_order(s: Scenario) -> None:
    run = await _started(s, reply_days=0.5, lead_days=2)
    request = await s.pending_approval(within=60)
    await s.fault(lose_reply_calls=1, down_after_order_calls=1_000_000)
    await s.decide(request["po_number"], approved=True)

    async def taken() -> bool:
        return bool(await s.orders())

    async def awaited() -> bool:
        # Re-checking it at growing intervals, or, once the checks are spent, left to the SKU to reconcile.
        return bool(await _state("Replenish", run, names.WAITING)) or (await _sku(s)).get("unresolved") is not None

    await eventually(taken, timeout=90, what=f"{run}'s order to be taken")
    await eventually(awaited, timeout=90, what=f"{run}'s order's answer to be awaited")


async def idle(s: Scenario) -> None:
    await s.setup(on_hand=500)
    assert (await s.check())["started"] is None


async def rested(s: Scenario) -> None:
    run = await _started(s)
    await s.decide((await s.pending_approval(within=60))["po_number"], approved=False)

    async def ended() -> bool:
        return any(o["run_id"] == run for o in (await _sku(s)).get("outcomes", []))

    await eventually(ended, timeout=60, what=f"{run} to end")


async def unwatched(s: Scenario) -> None:
    await s.setup(on_hand=500)
    await s.check()
    ok(await s.ingress.post(f"/SkuAgent/{s.sku}/unwatch"))


Kind = Callable[[Scenario], Awaitable[None]]


async def _each(ingress: httpx.AsyncClient, world: httpx.AsyncClient, name: str, kind: Kind, n: int) -> None:
    await asyncio.gather(*(kind(Scenario(ingress, world, f"{name}{i}")) for i in range(n)))


async def drive(ingress_url: str, world_url: str, per_kind: int) -> None:
    timeout = httpx.Timeout(30.0, connect=5.0)
    async with (
        httpx.AsyncClient(base_url=ingress_url, timeout=timeout) as ingress,
        httpx.AsyncClient(base_url=world_url, timeout=timeout) as world,
    ):
        # The slow waits first; the runs waiting for a first answer last, before their first reminder.
        await asyncio.gather(
            _each(ingress, world, "reminder", reminded, per_kind),
            _each(ingress, world, "reply", supplier_reply, per_kind),
            _each(ingress, world, "goods", goods, per_kind),
            _each(ingress, world, "idle", idle, 2),
            _each(ingress, world, "rested", rested, 2),
            _each(ingress, world, "unwatched", unwatched, 2),
        )
        # An unknown order is re-checked at growing intervals and then left to the SKU: caught mid-way.
        # An escalated run waits for the backup as long as it waited for the manager (20 days), so it
        # escalates here, at the end: escalated in the first batch, it lapsed before the copy on a loaded
        # machine (the batches took over 40 s), and the corpus had no run waiting for the backup.
        await asyncio.gather(
            _each(ingress, world, "escalation", escalated, per_kind),
            _each(ingress, world, "unknown", unknown_order, per_kind),
        )
        # A few seconds, well before the first reminder (1% of 3000 days: 60 s).
        await _each(ingress, world, "approval", waiting_for_approval, per_kind)


def _skip_info_logs(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if Path(member.name).name.startswith("LOG") else member


def recorded_port() -> int:
    """The port of the service whose address the corpus records: below `free_port()`'s range (it
    hands out 10,000 and up), so no other test's process is ever given it. Served later by another
    test while a check of this corpus runs, it was refused, rightly, as the data's stack still up."""
    for _ in range(500):
        port = random.randrange(6100, 7900)
        if port_is_free(port):
            return port
    raise RuntimeError("no free port from 6100 to 7899 for the corpus's service")


def make(out: Path, work: Path, per_kind: int = PER_KIND) -> CorpusManifest:
    """Run the stack in `work`, stop it, and write the corpus archive to `out`."""
    wall_origin = time.time()
    base = work / DATA
    restate = RestateServer(
        RestatePorts.free(),
        base,
        # A completed invocation's journal is not kept: the corpus needs only the waiting ones'.
        {"RESTATE_WORKER__INVOKER__INACTIVITY_TIMEOUT": "1s", "RESTATE_DEFAULT_JOURNAL_RETENTION": "0s"},
        log_path=work / "restate.log",
        config_file=REPO_ROOT / "restate.toml",
        node_name=NODE_NAME,
    )
    world = HypercornApp(
        WORLD_APP,
        free_port(),
        world_settings(restate.ingress_url, wall_origin),
        name="world",
        log_path=work / "world.log",
    )
    settings = service_settings(wall_origin)
    service = AsgiApp(
        SERVICE_APP,
        recorded_port(),
        {**settings, "REPLENISHER_WORLD_URL": world.url},
        name="service",
        log_path=work / "service.log",
        server=service_server(),
    )
    try:
        for process in (restate, world, service):
            process.start()
            process.wait_ready(60.0)
        register_deployment(restate.admin_url, service.url)
        ADMIN[:] = [Admin(restate.admin_url)]
        asyncio.run(drive(restate.ingress_url, world.url, per_kind))
        # Restate stops with its log's newest records in RocksDB's write-ahead log, uncompressed;
        # a start reads them into a compressed table. Once more, with the service still up, then stop.
        restate.restart(60.0)
        restate.stop()
    finally:
        service.stop()
        world.stop()
        restate.stop()
    manifest = CorpusManifest(
        restate_version=RESTATE_VERSION,
        service_env=settings,
        deployments=[service.url],
        about=f"made by tests/upgrade/make_corpus.py: {per_kind} runs at each wait, SKU agents in each state",
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as archive:
        archive.add(base, arcname=DATA, filter=_skip_info_logs)
        text = manifest.model_dump_json(indent=2).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime = len(text), int(time.time())
        archive.addfile(info, io.BytesIO(text))
    return manifest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="?", default=CORPUS)
    parser.add_argument("--per-kind", type=int, default=PER_KIND, help=f"runs at each kind of wait ({PER_KIND})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="upgrade-corpus-") as work:
        manifest = make(args.out, Path(work), args.per_kind)
    print(f"{args.out}: {args.out.stat().st_size // 1024} KB; {json.dumps(manifest.about)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
