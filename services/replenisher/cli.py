"""`replenisher`: the command line for people. Thin clients over Restate's ingress."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import httpx

from replenisher.config import DEFAULT_INGRESS_URL


def ingress_url() -> str:
    return os.environ.get("REPLENISHER_INGRESS_URL", DEFAULT_INGRESS_URL).rstrip("/")


def call(method: str, path: str, body: Any = None) -> Any:
    url = f"{ingress_url()}{path}"
    try:
        response = httpx.request(method, url, json=body, timeout=30)
    except httpx.TransportError as e:
        raise SystemExit(
            f"error: cannot reach Restate's ingress at {ingress_url()} ({e}); is the stack up? (make up)"
        ) from e
    if response.is_error:
        try:
            message = response.json().get("message", response.text)
        except ValueError:
            message = response.text
        raise SystemExit(f"error: {response.status_code}: {message}")
    return response.json() if response.content else None


def show(value: Any) -> None:
    print(json.dumps(value, indent=2))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="replenisher", description="Stock Replenisher: one durable agent per SKU.")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo: ~20 SKUs for a few compressed weeks")
    demo.add_argument("--days", type=float, default=21, help="business days to simulate (default 21)")
    demo.add_argument("--day-seconds", type=float, default=1.0, help="seconds per business day (default 1)")
    sub.add_parser("up", help="start the local stack (same as `make up`)")
    sub.add_parser("down", help="stop the local stack, keeping its data")
    for name, text in [
        ("check", "read stock now and start a replenishment if it is low"),
        ("watch", "check stock every business day on a durable timer"),
        ("unwatch", "stop the periodic check"),
        ("status", "the SKU agent's record: active run, outcomes, kept messages"),
    ]:
        sub.add_parser(name, help=text).add_argument("sku")
    deliver = sub.add_parser("deliver", help="send a message to a SKU's address")
    deliver.add_argument("sku")
    deliver.add_argument("event", choices=["approval", "supplier-reply", "goods"])
    deliver.add_argument("payload", help="the message as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "demo":
        from replenisher.demo import run_demo

        return run_demo(days=args.days, day_seconds=args.day_seconds)
    if args.command in ("up", "down"):
        from replenisher.stack.__main__ import main as stack_main

        return stack_main([args.command])
    if args.command == "deliver":
        try:
            payload = json.loads(args.payload)
        except json.JSONDecodeError as e:
            raise SystemExit(f"error: the payload is not valid JSON: {e}") from e
        show(call("POST", f"/SkuAgent/{args.sku}/deliver", {"event": args.event, "payload": payload}))
        return 0
    method, body = ("GET", None) if args.command == "status" else ("POST", {} if args.command == "watch" else None)
    show(call(method, f"/SkuAgent/{args.sku}/{args.command}", body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
