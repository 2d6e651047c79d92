"""`python -m replenisher.inbound.send`: send one message to a SKU as an outside party, signed.

What a supplier's, the warehouse's or the manager's system does, for trying the inbound
endpoint by hand: signs with the party's secret from the secrets file and prints the answer.

    python -m replenisher.inbound.send --party supplier:acme SKU-101 supplier-reply '{"po_number": ...}'
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from replenisher.inbound.signing import SecretsError, load_secrets, secret_for, signed_headers

DEFAULT_URL = "http://127.0.0.1:9090"
DEFAULT_SECRETS = Path(".stack/party-secrets.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replenisher.inbound.send", description=__doc__.split("\n")[0])
    parser.add_argument("sku")
    parser.add_argument("event", choices=["approval", "supplier-reply", "goods"])
    parser.add_argument("payload", help="the message's payload, as JSON")
    parser.add_argument("--party", required=True, help="manager, warehouse or supplier:<id>")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"the inbound endpoint (default {DEFAULT_URL})")
    parser.add_argument("--secrets", type=Path, default=DEFAULT_SECRETS, help=f"default {DEFAULT_SECRETS}")
    parser.add_argument("--idempotency-key", help="the same key again delivers once")
    args = parser.parse_args(argv)
    try:
        secret = secret_for(load_secrets(args.secrets), args.party)
        payload = json.loads(args.payload)
    except (SecretsError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if secret is None:
        print(f"error: no secret for {args.party!r} in {args.secrets}", file=sys.stderr)
        return 2
    path = f"/messages/{quote(args.sku, safe='')}"
    body = json.dumps({"event": args.event, "payload": payload}).encode()
    signed = signed_headers(secret, args.party, path, body, time.time(), args.idempotency_key or None)
    headers = {"content-type": "application/json", **signed}
    try:
        response = httpx.post(args.url.rstrip("/") + path, content=body, headers=headers, timeout=30)
    except httpx.HTTPError as e:
        print(f"error: {args.url} cannot be reached: {e}", file=sys.stderr)
        return 1
    print(f"{response.status_code} {response.text}")
    return 0 if response.is_success else 1


if __name__ == "__main__":
    raise SystemExit(main())
