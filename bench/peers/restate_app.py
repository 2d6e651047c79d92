"""Ours: the replenisher service exactly as deployed, plus the synthetic wake-up workflow.

Serve with `hypercorn 'bench.peers.restate_app:create_app()'` (a factory: it bootstraps the
service's parts). The real `SkuAgent` and `Replenish` run unchanged; `BenchRun` (a Restate
workflow) is the wake-up shape of `shape.py`: K `ctx.run` steps, a durable promise resolved by
its `approve` handler, one step after it. `/bench/stats` reports the tasks the process holds,
which is how many invocations it keeps open.
"""

from __future__ import annotations

import json
from typing import Any

import restate
from restate import WorkflowContext, WorkflowSharedContext

from bench.peers.gateway import process_stats
from bench.peers.shape import decide_turn, woke_at
from replenisher.durable.app import SERVICES
from replenisher.durable.contracts import check_addresses
from replenisher.wiring import bootstrap, serving

bench_run = restate.Workflow("BenchRun")


# Async, like every step of the real service: the SDK runs a plain function's step on a thread pool.
async def decide(turn: int) -> dict[str, Any]:
    return decide_turn(turn)


async def stamp() -> float:
    return woke_at()


@bench_run.main()
async def run(ctx: WorkflowContext, steps: int) -> float:
    for turn in range(steps):
        await ctx.run_typed(f"decide {turn}", decide, restate.RunOptions(type_hint=dict), turn)
    ctx.set("ready", True)
    await ctx.promise("approval", type_hint=dict).value()
    return await ctx.run_typed("after approval", stamp, restate.RunOptions(type_hint=float))


@bench_run.handler(name="ready")
async def ready(ctx: WorkflowSharedContext) -> bool:
    return bool(await ctx.get("ready", type_hint=bool))


@bench_run.handler()
async def approve(ctx: WorkflowSharedContext, payload: dict[str, Any]) -> None:
    await ctx.promise("approval", type_hint=dict).resolve(payload)


def create_app() -> Any:
    """The services with their parts from the environment (`bootstrap`), as the service's own factory builds them."""
    parts = bootstrap()
    parts.check()
    # Every service the product registers: a run that sends to one left out (AuditLog, say) pauses.
    services = [*SERVICES, bench_run]
    check_addresses(services)
    service = restate.app(services=services)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/bench/stats":
            body = json.dumps(process_stats()).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        with serving(parts):
            await service(scope, receive, send)

    return app
