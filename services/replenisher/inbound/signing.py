"""Signing and verifying messages from outside parties, as webhook providers do.

Pure: the inbound endpoint verifies with it, and the simulated world (playing every outside
party) signs with it. Each party has its own secret; a signature covers the timestamp, the
party, the request path, the sender's idempotency key (empty when it sends none) and the
exact body bytes:

    x-replenisher-signature: v2=<hex HMAC-SHA256(secret,
        "v2:" + timestamp + ":" + party + ":" + path + ":" + key + "\n" + body)>

The key is printable ASCII, so the first newline ends it. The first version, `v1=` over
`"v1:" + timestamp + ":" + party + ":" + path + ":" + body`, is still verified, but only
for a request without an idempotency key: a key it does not cover could be changed by whoever
captured the request, and Restate would take the replay for a new message.

The secrets live in one JSON file (`{"supplier:cogs": "...", "warehouse": "...", "manager": "..."}`,
mode 0600) that both sides are given. Suppliers come and go, so the file may instead hold a
master, `"supplier:*"`, from which each supplier's own secret is derived
(HMAC-SHA256(master, "supplier:<id>"), hex): that is what the supplier is given, and it
cannot compute another supplier's from it. A secret named for a supplier wins over the master.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from replenisher.domain.documents import Sender

PARTY_HEADER = "x-replenisher-party"
TIMESTAMP_HEADER = "x-replenisher-timestamp"
SIGNATURE_HEADER = "x-replenisher-signature"
IDEMPOTENCY_HEADER = "idempotency-key"
VERSION = "v2"
VERSIONS = ("v1", "v2")
MIN_SECRET_LENGTH = 32
SUPPLIER_MASTER = "supplier:*"


class SecretsError(ValueError):
    """The party secrets file is missing, unreadable or holds something that is not a secret."""


def signature(
    secret: str, timestamp: str, party: str, path: str, body: bytes, key: str | None = None, version: str = VERSION
) -> str:
    """`version=` and the HMAC; v1 covers no key, so it signs only a request without one."""
    if version == "v1":
        if key is not None:
            raise ValueError("a v1 signature does not cover an idempotency key: sign v2")
        signed = f"v1:{timestamp}:{party}:{path}:".encode() + body
    elif version == "v2":
        signed = f"v2:{timestamp}:{party}:{path}:{key or ''}\n".encode() + body
    else:
        raise ValueError(f"no signature version {version!r} (one of {', '.join(VERSIONS)})")
    return f"{version}=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify(secret: str, timestamp: str, party: str, path: str, body: bytes, given: str, key: str | None = None) -> bool:
    """Whether `given` signs this request; a v1 signature never signs one that carries a key."""
    version = given.partition("=")[0]
    if version not in VERSIONS or (version == "v1" and key is not None):
        return False
    expected = signature(secret, timestamp, party, path, body, key, version)
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogatepass"))


def signed_headers(
    secret: str, party: str, path: str, body: bytes, now: float, key: str | None = None
) -> dict[str, str]:
    """The headers of a signed request, the idempotency key among them when there is one."""
    timestamp = str(int(now))
    headers = {
        PARTY_HEADER: party,
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: signature(secret, timestamp, party, path, body, key),
    }
    if key is not None:
        headers[IDEMPOTENCY_HEADER] = key
    return headers


_SECRETS = TypeAdapter(dict[str, str])


def parse_secrets(raw: bytes | str) -> dict[str, str]:
    try:
        found = _SECRETS.validate_json(raw)
    except ValidationError as e:
        raise SecretsError(f"party secrets must be a JSON object of party to secret: {e.errors()[0]['msg']}") from e
    for party, secret in found.items():
        try:
            if party != SUPPLIER_MASTER:
                Sender(party=party)
        except ValidationError:
            raise SecretsError(f"{party!r} is not a party (manager, warehouse or supplier:<id>)") from None
        if party == "operator":
            raise SecretsError("operators use the internal ingress; they have no inbound secret")
        if len(secret) < MIN_SECRET_LENGTH:
            raise SecretsError(f"the secret of {party!r} is shorter than {MIN_SECRET_LENGTH} characters")
    return found


def secret_for(secrets: Mapping[str, str], party: str) -> str | None:
    """The party's secret: its own entry, or for a supplier one derived from the master."""
    if party == SUPPLIER_MASTER:
        return None  # the master signs nothing itself
    if party in secrets:
        return secrets[party]
    master = secrets.get(SUPPLIER_MASTER)
    if master is None or not party.startswith("supplier:"):
        return None
    try:
        Sender(party=party)
    except ValidationError:
        return None
    return hmac.new(master.encode(), party.encode(), hashlib.sha256).hexdigest()


def load_secrets(path: Path) -> dict[str, str]:
    try:
        return parse_secrets(path.read_bytes())
    except OSError as e:
        raise SecretsError(f"cannot read party secrets {path}: {e.strerror}") from e


def new_secrets(parties: Iterable[str] = ("manager", "warehouse", SUPPLIER_MASTER)) -> dict[str, str]:
    return {party: secrets.token_hex(32) for party in parties}


def write_private(path: Path, text: str) -> None:
    """`text` written 0600 from the start, whole or not at all: the file never exists readable
    by others, nor half written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_secrets(path: Path, values: Mapping[str, str]) -> None:
    write_private(path, json.dumps(dict(values), indent=2))
