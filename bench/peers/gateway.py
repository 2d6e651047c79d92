"""The peers' front door: the same URLs as Restate's ingress, so one driver talks to every system.

    POST /SkuAgent/{sku}/check                   read stock; start a replenishment if below safety stock
    POST /SkuAgent/{sku}/deliver                 route {event, payload} to the SKU's active run
    GET  /restate/workflow/Replenish/{id}/attach the run's result, when it has one
    POST /BenchRun/{id}/run/send                 start a synthetic wake-up run (body: K)
    POST /BenchRun/{id}/ready                    whether it waits for its approval yet
    POST /BenchRun/{id}/approve                  resolve the approval
    GET  /restate/workflow/BenchRun/{id}/attach  the time the step after the approval ran
    GET  /bench/stats                            asyncio tasks held by this process

The world pushes its messages here too (WORLD_INGRESS_URL). Which run is active for a SKU is
kept in memory: the benchmark starts one run per SKU, so nothing is lost that it needs.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any, Protocol

from aiohttp import web
from pydantic import ValidationError

from replenisher.adapters.world import HttpWorld
from replenisher.domain.documents import EVENT_PAYLOADS, EventKind, StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import run_id_of


class PeerEngine(Protocol):
    async def start_replenish(self, run_id: str, stock: StockLevel) -> None: ...

    async def send(self, run_id: str, event: EventKind, payload: dict[str, Any]) -> None: ...

    async def replenish_result(self, run_id: str) -> ReplenishmentResult: ...

    async def start_bench(self, run_id: str, steps: int) -> None: ...

    async def bench_ready(self, run_id: str) -> bool: ...

    async def approve_bench(self, run_id: str, payload: dict[str, Any]) -> None: ...

    async def bench_result(self, run_id: str) -> float: ...


class Gateway:
    def __init__(self, engine: PeerEngine, world_url: str) -> None:
        self.engine = engine
        self.world = HttpWorld(world_url)
        self.runs_started: dict[str, int] = {}
        self.active: dict[str, str] = {}

    async def check(self, request: web.Request) -> web.Response:
        sku = request.match_info["sku"]
        stock = await self.world.erp.get_stock(sku)
        started = None
        if stock.on_hand < stock.safety_stock and sku not in self.active:
            n = self.runs_started.get(sku, 0) + 1
            self.runs_started[sku] = n
            started = run_id_of(sku, n)
            self.active[sku] = started
            await self.engine.start_replenish(started, stock)
        return web.json_response(
            {"sku": sku, "on_hand": stock.on_hand, "safety_stock": stock.safety_stock, "started": started}
        )

    async def deliver(self, request: web.Request) -> web.Response:
        sku = request.match_info["sku"]
        body = await request.json()
        event = body.get("event")
        if event not in EVENT_PAYLOADS:
            return web.json_response({"error": f"unknown event {event!r}"}, status=400)
        try:
            document = EVENT_PAYLOADS[event].model_validate(body.get("payload"))
        except ValidationError as e:
            return web.json_response({"error": str(e)}, status=400)
        run_id = self.active.get(sku)
        if run_id is not None:
            await self.engine.send(run_id, event, document.model_dump(mode="json"))
        return web.json_response({"sku": sku, "event": event, "run_id": run_id, "kept": run_id is None})

    async def attach_replenish(self, request: web.Request) -> web.Response:
        run_id = request.match_info["id"]
        result = await self.engine.replenish_result(run_id)
        self.active.pop(result.sku, None)
        return web.json_response(result.model_dump(mode="json"))

    async def start_bench(self, request: web.Request) -> web.Response:
        await self.engine.start_bench(request.match_info["id"], int(await request.json()))
        return web.json_response({"started": request.match_info["id"]}, status=202)

    async def bench_ready(self, request: web.Request) -> web.Response:
        return web.json_response(await self.engine.bench_ready(request.match_info["id"]))

    async def approve_bench(self, request: web.Request) -> web.Response:
        await self.engine.approve_bench(request.match_info["id"], await request.json())
        return web.json_response(None)

    async def attach_bench(self, request: web.Request) -> web.Response:
        return web.json_response(await self.engine.bench_result(request.match_info["id"]))

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response(process_stats())

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    def app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.add_routes(
            [
                web.get("/health", self.health),
                web.get("/bench/stats", self.stats),
                web.post("/SkuAgent/{sku}/check", self.check),
                web.post("/SkuAgent/{sku}/deliver", self.deliver),
                web.get("/restate/workflow/Replenish/{id}/attach", self.attach_replenish),
                web.post("/BenchRun/{id}/run/send", self.start_bench),
                web.post("/BenchRun/{id}/ready", self.bench_ready),
                web.post("/BenchRun/{id}/approve", self.approve_bench),
                web.get("/restate/workflow/BenchRun/{id}/attach", self.attach_bench),
            ]
        )
        return app


def process_stats() -> dict[str, int]:
    """What this process holds: the tasks of its event loop and the objects the GC tracks."""
    return {"tasks": len(asyncio.all_tasks()), "gc_objects": len(gc.get_objects())}


async def serve(app: web.Application, port: int) -> None:
    """Serve until cancelled (SIGINT/SIGTERM end the process through asyncio.run)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
