"""Helpers for the world's tests: the world as a subprocess, a fake ingress, admin calls, polling.

The world runs as a subprocess, exactly as the demo starts it. The fake ingress runs in
the test's own event loop under hypercorn, so tests can read what it received directly
and change how it answers (fail, refuse) per SKU.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config

from replenisher.stack.ports import free_port  # re-exported for the world's tests
from support import eventually  # re-exported for the world's tests

DAY_SECONDS = 0.2
"""Short enough that a 'day' passes quickly, long enough that ordering of plans is stable."""

STARTUP_TIMEOUT = 20.0


# --- the world as a subprocess ---------------------------------------------------------


def _open_log(path: Path) -> IO[bytes]:
    return path.open("wb")


@dataclass
class WorldProcess:
    port: int
    process: asyncio.subprocess.Process
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode or 0


async def launch_world(
    log_dir: Path, *, ingress_url: str, day_seconds: float = DAY_SECONDS, extra: Mapping[str, str] | None = None
) -> WorldProcess:
    port = free_port()
    log_path = log_dir / f"world-{port}.log"
    env = {
        **os.environ,
        "WORLD_INGRESS_URL": ingress_url,
        "WORLD_DAY_SECONDS": str(day_seconds),
        "WORLD_CATALOGUE": "empty",
        **(extra or {}),
    }
    log_file = _open_log(log_path)
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "hypercorn",
            "simulated_world.app:app",
            "--bind",
            f"127.0.0.1:{port}",
            "-w",
            "0",
            env=env,
            stdout=log_file,
            stderr=log_file,
        )
    finally:
        log_file.close()
    world = WorldProcess(port, process, log_path)
    async with httpx.AsyncClient(timeout=1.0) as client:

        async def healthy() -> bool:
            if process.returncode is not None:
                pytest.fail(f"world exited with {process.returncode}:\n{world.log_text()}")
            try:
                return (await client.get(f"{world.url}/health")).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(healthy, timeout=STARTUP_TIMEOUT, interval=0.05, what="the world to answer /health")
    return world


# --- a fake Restate ingress ------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    sku: str
    idempotency_key: str | None
    event: str
    payload: dict[str, Any]
    status: int
    duplicate: bool = False


@dataclass
class FakeIngress:
    """Records every push; like Restate, a repeated idempotency key is not delivered twice."""

    port: int
    received: list[Delivery] = field(default_factory=list)
    fail_next: dict[str, int] = field(default_factory=dict)
    """SKU -> how many more pushes to answer with 503."""
    refuse: dict[str, int] = field(default_factory=dict)
    """SKU -> a 4xx status to answer every push with."""
    _seen: set[str] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def delivered(self, sku: str) -> list[Delivery]:
        return [d for d in self.received if d.sku == sku and d.status == 200 and not d.duplicate]

    def attempts(self, sku: str) -> list[Delivery]:
        return [d for d in self.received if d.sku == sku]

    def _answer(self, sku: str, key: str | None) -> tuple[int, bool]:
        """The status to answer with, and whether this push repeats one already delivered."""
        if sku in self.refuse:
            return self.refuse[sku], False
        if self.fail_next.get(sku, 0) > 0:
            self.fail_next[sku] -= 1
            return 503, False
        if key is not None and key in self._seen:
            return 200, True
        if key is not None:
            self._seen.add(key)
        return 200, False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        parts = scope["path"].strip("/").split("/")
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status = 404
        if len(parts) == 3 and parts[0] == "SkuAgent" and parts[2] == "deliver":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            key = headers.get("idempotency-key")
            status, duplicate = self._answer(parts[1], key)
            document = json.loads(body)
            self.received.append(Delivery(parts[1], key, document["event"], document["payload"], status, duplicate))
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"{}" if status == 200 else b"not now"})


@dataclass
class RunningIngress:
    ingress: FakeIngress
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 10)


async def start_ingress(port: int | None = None) -> RunningIngress:
    ingress = FakeIngress(port or free_port())
    config = Config()
    config.bind = [f"127.0.0.1:{ingress.port}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    stop = asyncio.Event()
    task = asyncio.get_running_loop().create_task(serve(ingress, config, shutdown_trigger=stop.wait))
    async with httpx.AsyncClient(timeout=1.0) as client:

        async def up() -> bool:
            try:
                return (await client.get(f"{ingress.url}/ping")).status_code == 404
            except httpx.TransportError:
                return False

        await eventually(up, timeout=STARTUP_TIMEOUT, what="the fake ingress")
    return RunningIngress(ingress, stop, task)


# --- admin helper ----------------------------------------------------------------------


class WorldAdmin:
    """The world's setup and inspection endpoints, for arranging and checking a test."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.client.request(method, path, **kwargs)
        assert response.is_success, f"{method} {path} -> {response.status_code} {response.text}"
        return response.json()

    async def supplier(self, sid: str, prices: dict[str, float], **setup: Any) -> Any:
        body = {"name": f"Supplier {sid}", "prices": prices, "lead_days": 1.0, "reply_days": 0.5, **setup}
        return await self.ok("PUT", f"/admin/suppliers/{sid}", json=body)

    async def item(self, sku: str, suppliers: list[str], **setup: Any) -> Any:
        body = {"on_hand": 10, "safety_stock": 20, "target_stock": 100, "suppliers": suppliers, **setup}
        return await self.ok("PUT", f"/admin/items/{sku}", json=body)

    async def faults(self, sid: str, **faults: Any) -> Any:
        return await self.ok("PUT", f"/faults/suppliers/{sid}", json=faults)

    async def policy(self, **policy: Any) -> Any:
        return await self.ok("PUT", "/manager/policy", json=policy)

    async def calls(self, **where: str) -> list[dict[str, Any]]:
        return (await self.ok("GET", "/admin/calls", params=where))["calls"]

    async def orders(self, **where: str) -> list[dict[str, Any]]:
        return (await self.ok("GET", "/admin/orders", params=where))["orders"]

    async def messages(self, sku: str) -> list[dict[str, Any]]:
        return (await self.ok("GET", "/admin/messages", params={"sku": sku}))["messages"]

    async def receipts(self, sku: str) -> list[dict[str, Any]]:
        return (await self.ok("GET", "/erp/goods-receipts", params={"sku": sku}))["receipts"]

    async def approvals(self, status: str = "all") -> list[dict[str, Any]]:
        return (await self.ok("GET", "/manager/approval-requests", params={"status": status}))["requests"]


@dataclass(frozen=True)
class Names:
    """Fresh SKU, supplier and PO names, so tests sharing one world never see each other."""

    n: int

    @property
    def sku(self) -> str:
        return f"SKU-T{self.n}"

    @property
    def supplier(self) -> str:
        return f"sup-t{self.n}"

    def po(self, k: int = 1) -> str:
        return f"PO-T{self.n}-{k}"


_names = itertools.count(1)


def next_names() -> Names:
    return Names(next(_names))
