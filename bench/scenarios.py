"""The three measurements, run against one system at a time through its Restate-shaped front door.

The load generator is aiohttp (one session, connection reuse), not httpx: on this machine httpx
costs an order of magnitude more client CPU per request at concurrency, and the generator's own
CPU is recorded beside the system's so a reader can see it was not the bottleneck.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp

from bench.engine_work import engine_work
from bench.measure import Meter, Reading, dir_mb, summary_ms
from bench.peers.shape import QUOTE_VALID_DAYS
from bench.polling import poll_progress
from bench.retry import TransientError
from bench.systems import Ours, System

JSON = dict[str, Any]
Progress = Callable[[str], None]

PRICE = 4.0
# Restate refuses a content type on a call without input.
NO_BODY = {"Content-Type"}


class BenchError(RuntimeError):
    """A system did not do what the scenario needs: the bench stops rather than report half a result."""


class ServerError(BenchError, TransientError):
    """A 5xx answer: the measurement is tried once more before the system counts as failed."""


async def expect(response: Awaitable[aiohttp.ClientResponse], what: str) -> Any:
    async with await response as r:
        if r.status >= 300:
            kind = ServerError if r.status >= 500 else BenchError
            raise kind(f"{what}: HTTP {r.status}: {(await r.text())[:300]}")
        return await r.json(content_type=None)


async def poll(predicate: Callable[[], Awaitable[Any]], timeout: float, what: str, interval: float = 0.05) -> Any:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise BenchError(f"{what} did not happen within {timeout:g}s")
        await asyncio.sleep(interval)


class Deadline:
    """When runs started together must all be waiting for their approval. They make progress
    together (a slower peer's engine interleaves their steps), so no run is done long before
    the last: each is given the time of all the steps started with it, not a time of its own."""

    BASE_S = 300.0
    PER_STEP_S = 0.05

    def __init__(self, runs: int, steps: int) -> None:
        self.runs, self.steps = runs, steps
        self.budget = self.BASE_S + self.PER_STEP_S * steps
        self.at = time.monotonic() + self.budget

    def left(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    def __str__(self) -> str:
        return f"{self.budget:g}s for the {self.runs} runs of {self.steps} steps in all started together"


async def bounded(concurrency: int, items: list[Any], work: Callable[[Any], Awaitable[None]]) -> None:
    queue = list(reversed(items))

    async def worker() -> None:
        while queue:
            await work(queue.pop())

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(items)))))


class Driver:
    def __init__(self, system: System, session: aiohttp.ClientSession, progress: Progress) -> None:
        self.system = system
        self.http = session
        self.say = progress
        self.meter = Meter(system.pids())
        self.idle_rate: dict[str, float] = {}

    # --- helpers -------------------------------------------------------------------------

    def refresh_pids(self) -> None:
        self.meter = Meter(self.system.pids())

    async def measure_idle(self, seconds: float = 2.0, windows: int = 3) -> dict[str, float]:
        """CPU each process burns per second doing nothing: subtracted from per-operation costs.

        The lowest of a few short windows, so a burst of leftover work (a recovery finishing,
        a compaction) is not mistaken for the idle rate and subtracted from the operations.
        """
        rates: dict[str, float] = {}
        for _ in range(windows):
            before = self.meter.read()
            await asyncio.sleep(seconds / windows)
            elapsed, cpu = Meter.delta(before, self.meter.read())
            for k, v in cpu.items():
                rates[k] = min(rates.get(k, float("inf")), v / elapsed)
        self.idle_rate = rates
        return self.idle_rate

    def cost(self, before: Reading, after: Reading, operations: int) -> tuple[float, JSON]:
        """Wall time, and per process: raw CPU seconds and net CPU milliseconds per operation."""
        elapsed, cpu = Meter.delta(before, after)
        per_op = {}
        for name, seconds in cpu.items():
            idle = 0.0 if name == "load generator" else self.idle_rate.get(name, 0.0) * elapsed
            per_op[name] = round(max(seconds - idle, 0.0) * 1000 / max(operations, 1), 3)
        return elapsed, {"cpu_s": {k: round(v, 4) for k, v in cpu.items()}, "cpu_ms_per_op": per_op}

    async def stats(self) -> JSON:
        return await expect(self.http.get(self.system.stats_url), "service stats")

    async def stock_world(self, supplier: str, skus: list[str]) -> None:
        world = self.system.world_url
        setup = {
            "name": supplier,
            "prices": dict.fromkeys(skus, PRICE),
            "lead_days": 0,
            "reply_days": 0,
            "deliveries": 1,
            "quote_valid_days": QUOTE_VALID_DAYS,
        }
        await expect(self.http.put(f"{world}/admin/suppliers/{supplier}", json=setup), "supplier setup")
        item = {"on_hand": 5, "safety_stock": 20, "target_stock": 100, "suppliers": [supplier]}

        async def put(sku: str) -> None:
            await expect(self.http.put(f"{world}/admin/items/{sku}", json=item), f"item {sku}")

        await bounded(20, skus, put)

    async def manager(self, auto_approve: bool) -> None:
        # The world's PUT changes only the fields sent: no budget is stated as such.
        policy = {"auto_approve": auto_approve, "delay_days": 0, "max_unit_price": None}
        await expect(self.http.put(f"{self.system.world_url}/manager/policy", json=policy), "manager policy")

    async def check(self, sku: str) -> str:
        started = await expect(
            self.http.post(f"{self.system.ingress_url}/SkuAgent/{sku}/check", skip_auto_headers=NO_BODY), f"check {sku}"
        )
        if not started.get("started"):
            raise BenchError(f"check {sku} started no replenishment: {started}")
        run_id: str = started["started"]
        return run_id

    async def attach(self, workflow: str, key: str) -> Any:
        url = f"{self.system.ingress_url}/restate/workflow/{workflow}/{key}/attach"
        for _ in range(100):
            async with self.http.get(url) as r:
                if r.status == 404:  # the send that starts it may not be applied yet
                    await asyncio.sleep(0.05)
                    continue
                if r.status >= 300:
                    raise BenchError(f"attach {workflow}/{key}: HTTP {r.status}: {(await r.text())[:300]}")
                return await r.json(content_type=None)
        raise BenchError(f"{workflow}/{key} never appeared")

    # --- 3. throughput -------------------------------------------------------------------

    async def replenish_once(self, sku: str) -> JSON:
        run_id = await self.check(sku)
        result: JSON = await self.attach("Replenish", run_id)
        return result

    async def throughput(self, concurrency: int, count: int, tag: str) -> JSON:
        skus = [f"T{tag}-{concurrency}-{i}" for i in range(count)]
        await self.stock_world(f"sup-t{tag}-{concurrency}", skus)
        await self.manager(auto_approve=True)
        latencies: list[float] = []
        outcomes: Counter[str] = Counter()
        turns: list[int] = []

        async def one(sku: str) -> None:
            started = time.perf_counter()
            result = await self.replenish_once(sku)
            latencies.append(time.perf_counter() - started)
            outcomes[result["outcome"]] += 1
            turns.append(result["turns"])

        before = self.meter.read()
        await bounded(concurrency, skus, one)
        elapsed, cost = self.cost(before, self.meter.read(), count)
        if outcomes["received"] != count:
            raise BenchError(f"{self.system.name}: not every replenishment ended received: {dict(outcomes)}")
        engine = await self.engine_work(f"T{tag}-{concurrency}-", count)
        return {
            "concurrency": concurrency,
            "count": count,
            "elapsed_s": round(elapsed, 3),
            "per_s": round(count / elapsed, 2),
            "latency": summary_ms(latencies),
            "turns": round(sum(turns) / len(turns), 2),
            "outcomes": dict(outcomes),
            **engine,
            **cost,
        }

    async def engine_work(self, key_prefix: str, count: int) -> JSON:
        """Ours: Restate's work per replenishment (`bench.engine_work`); the peers: nothing."""
        if not isinstance(self.system, Ours):
            return {}
        from replenisher.stack.admin import Admin

        # Keys are the level's SKUs (`Tm-10-3`) and their runs (`replenish-Tm-10-3-1`).
        return await engine_work(Admin(self.system.restate.admin_url), key_prefix, count)

    # --- 1. wake-up ----------------------------------------------------------------------

    async def start_bench_runs(self, steps: int, n: int, tag: str) -> list[str]:
        ids = [f"wake-{tag}-{steps}-{i}-{uuid.uuid4().hex[:6]}" for i in range(n)]
        ingress = self.system.ingress_url

        async def start(run_id: str) -> None:
            await expect(self.http.post(f"{ingress}/BenchRun/{run_id}/run/send", json=steps), f"start {run_id}")

        await bounded(4, ids, start)
        return ids

    async def wait_bench_ready(self, ids: list[str], deadline: Deadline) -> None:
        """Until every run waits for its approval, by the deadline of all the runs started with them."""
        ingress = self.system.ingress_url
        for run_id in ids:

            async def ready(run_id: str = run_id) -> bool:
                async with self.http.post(f"{ingress}/BenchRun/{run_id}/ready", skip_auto_headers=NO_BODY) as r:
                    return r.status == 200 and bool(await r.json(content_type=None))

            await poll(ready, deadline.left(), f"{run_id} to wait for its approval ({deadline})")

    async def wake(self, ids: list[str]) -> JSON:
        """Resolve each run's approval in turn; time until its next step ran, and the CPU per wake."""
        ingress = self.system.ingress_url
        latencies: list[float] = []
        await self.measure_idle(1.5)
        before = self.meter.read()
        for run_id in ids:
            sent = time.time()
            await expect(self.http.post(f"{ingress}/BenchRun/{run_id}/approve", json={"approved": True}), "approve")
            stamp = await self.attach("BenchRun", run_id)
            latencies.append(float(stamp) - sent)
        _, cost = self.cost(before, self.meter.read(), len(ids))
        idle = {k: round(v, 4) for k, v in self.idle_rate.items()}
        return {"latency": summary_ms(latencies), **cost, "idle_cpu_per_s": idle}

    async def cold_wake(self, steps: int, n: int, tag: str) -> JSON:
        """Ours with a short inactivity timeout: `n` runs of `steps` steps started, left until
        Restate has suspended every one, then woken one by one (`wake`)."""
        ids = await self.start_bench_runs(steps, n, tag)
        await self.wait_bench_ready(ids, Deadline(n, steps * n))

        async def all_suspended() -> bool:
            return await self.suspended_count(ids) >= len(ids)

        await poll(all_suspended, 60, f"{len(ids)} waiting runs to suspend", interval=0.5)
        return await self.wake(ids)

    # --- 2. idle cost --------------------------------------------------------------------

    async def pending_approvals(self) -> list[JSON]:
        body = await expect(
            self.http.get(f"{self.system.world_url}/manager/approval-requests", params={"status": "pending"}),
            "approval requests",
        )
        requests: list[JSON] = body["requests"]
        return requests

    async def fill(self, skus: list[str], concurrency: int = 8) -> None:
        """Start a replenishment for each SKU, a few at a time, and wait until each waits for approval."""

        async def start(sku: str) -> None:
            await self.check(sku)

        await bounded(concurrency, skus, start)

    async def wake_waiting(self, request: JSON) -> JSON:
        """Deliver the approval to the SKU's address; the next step's first call is the live price."""
        sku = request["request"]["sku"]
        approval = {
            "po_number": request["request"]["po_number"],
            "token": request["request"]["token"],
            "approved": True,
            "up_to": request["request"]["unit_price"],
            "by": "bench",
        }
        world = self.system.world_url
        sent = time.time()
        await expect(
            self.http.post(
                f"{self.system.ingress_url}/SkuAgent/{sku}/deliver", json={"event": "approval", "payload": approval}
            ),
            f"deliver approval to {sku}",
        )

        # One question, held open by the world until the first live-price call about the SKU: a
        # look-up whose cost does not grow with the calls piled up (polling the call log did,
        # and competed with the wake it timed).
        first = await expect(
            self.http.get(f"{world}/admin/first-call", params={"sku": sku, "op": "live_price", "wait": "60"}),
            "first call",
        )
        if first["at"] is None:
            raise BenchError(f"{sku}'s run took no next step within 60s")
        if first["at"] < sent:
            raise BenchError(f"{sku} asked for the live price before it was approved")
        return {"sku": sku, "latency_s": first["at"] - sent}

    async def idle_cost(
        self,
        sizes: list[int],
        wakes: int,
        settle: float,
        tag: str = "",
        observe: Callable[[], Awaitable[JSON]] | None = None,
    ) -> list[JSON]:
        """Runs left waiting for their approval, `sizes` of them in turn: at each, the memory, tasks
        and disk they cost, then `wakes` of the oldest woken. `observe`, when given, adds what it
        reads at each size (after the memory) to the point as `observed`."""
        total = max(sizes)
        skus = [f"I{tag}-{i}" for i in range(total)]
        self.say(f"    stocking the world with {total} SKUs")
        await self.stock_world(f"sup-idle{tag}", skus)
        await self.manager(auto_approve=False)
        data = self.system.data_dir()
        disk0 = dir_mb(data) if data else 0.0
        memory0 = self.meter.memory()
        stats0 = await self.stats()
        created = woken = 0
        woken_skus: set[str] = set()
        points = []
        for size in sizes:
            self.say(f"    {self.system.name}: {created} -> {size} waiting runs")
            t = time.perf_counter()
            await self.fill(skus[created:size])
            created = size

            async def waiting_now() -> int:
                return len(await self.pending_approvals())

            # The list is read whole, so it is read less often as it grows (10,000 requests: 5 s).
            every = 0.5 if size <= 1000 else 5.0
            await poll_progress(waiting_now, size - woken, 600, f"{size} runs to wait for approval", every)
            fill_s = time.perf_counter() - t
            await asyncio.sleep(settle)
            waiting = size - woken
            memory = self.meter.memory()
            observed = await observe() if observe is not None else None
            stats = await self.stats()
            disk = dir_mb(data) if data else 0.0
            # Approvals go straight to the SKU's address, so the world still lists the woken as pending.
            pending = [
                r
                for r in sorted(await self.pending_approvals(), key=lambda r: r["received_at"])
                if r["request"]["sku"] not in woken_skus
            ]
            await self.measure_idle(1.5)
            before = self.meter.read()
            wake_latencies = []
            for request in pending[:wakes]:
                wake_latencies.append((await self.wake_waiting(request))["latency_s"])
                woken_skus.add(request["request"]["sku"])
            _, cost = self.cost(before, self.meter.read(), len(wake_latencies))
            woken += len(wake_latencies)
            points.append(
                {
                    "waiting": waiting,
                    "fill_s": round(fill_s, 2),
                    "memory_mb": {k: {m: round(v, 1) for m, v in mem.items()} for k, mem in memory.items()},
                    "memory_growth_kb_per_run": {
                        k: round((memory[k]["rss_mb"] - memory0[k]["rss_mb"]) * 1024 / waiting, 2) for k in memory
                    },
                    "tasks": stats["tasks"],
                    "tasks_per_run": round((stats["tasks"] - stats0["tasks"]) / waiting, 3),
                    "disk_mb": round(disk, 2),
                    "disk_kb_per_run": round((disk - disk0) * 1024 / waiting, 2) if data else None,
                    "wake_one": {"latency": summary_ms(wake_latencies), **cost},
                }
            )
            if observed is not None:
                points[-1]["observed"] = observed
        return points

    async def suspended_count(self, run_ids: Sequence[str]) -> int:
        """How many of these runs Restate holds suspended. Only these: runs an earlier, retried
        attempt left waiting suspend too, and must not count for (or against) this one."""
        if not isinstance(self.system, Ours) or not run_ids:
            return 0
        from replenisher.operations.restate.http import literal
        from replenisher.stack.admin import Admin

        keys = ", ".join(literal(run_id) for run_id in run_ids)
        rows = await Admin(self.system.restate.admin_url).asql(
            f"SELECT count(*) AS n FROM sys_invocation WHERE status = 'suspended' AND target_service_key IN ({keys})"
        )
        return int(rows[0]["n"])
