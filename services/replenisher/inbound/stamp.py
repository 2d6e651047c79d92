"""The door's stamp: how the service tells a sender the inbound endpoint authenticated from one
a caller on the internal ingress merely states.

The inbound endpoint and the service share a door key (a file of 64 hex characters, mode
0600, `REPLENISHER_DOOR_KEY_FILE` for both). The door stamps every message it forwards with
an HMAC-SHA256, keyed with it, over the SKU, the event, the payload, the sender and the
door's clock. The SKU's address believes the sender and the arrival time only under a stamp
that checks; anything else on `deliver` came from whoever reaches the ingress, an operator,
and is recorded as `operator (said: <party>)`, with the arrival time its own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Any

from replenisher.domain.credentials import KEY_HEX_LENGTH, hex_key
from replenisher.domain.documents import OPERATOR, OPERATOR_PARTY, EventKind, Sender
from replenisher.inbound.signing import write_private

DOOR_KEY_ENV = "REPLENISHER_DOOR_KEY_FILE"
STAMP_VERSION = "door-v1"


class DoorKeyError(ValueError):
    """The door key file is missing, unreadable or holds no key."""


def stamp(key: bytes, sku: str, event: EventKind, payload: dict[str, Any], sender: Sender, received_at: float) -> str:
    """`door-v1=` and the hex HMAC of what the door vouches for, in a canonical JSON."""
    vouched = {"sku": sku, "event": event, "payload": payload, "party": sender.party, "received_at": received_at}
    text = json.dumps(vouched, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return f"{STAMP_VERSION}=" + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def vouched_sender(
    key: bytes | None,
    sku: str,
    event: EventKind,
    payload: dict[str, Any],
    stated: Sender | None,
    received_at: float | None,
    given: str | None,
) -> tuple[Sender, float | None]:
    """Who sent a delivery, and when it arrived at the door, as far as the service can tell.

    No sender stated: an operator. A sender under a stamp that checks: that sender, at the
    door's time. Any other stated sender: an operator, who said it was that party."""
    if stated is None or stated.is_operator:
        return OPERATOR, None
    if key is not None and given is not None and received_at is not None:
        expected = stamp(key, sku, event, payload, stated, received_at)
        if hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogatepass")):
            return stated, received_at
    return Sender(party=OPERATOR_PARTY, said=stated.party), None


def parse_door_key(text: str) -> bytes:
    key = hex_key(text)
    if key is None:
        raise DoorKeyError(f"a door key is {KEY_HEX_LENGTH} hex characters")
    return key


def load_door_key(path: Path) -> bytes:
    try:
        return parse_door_key(path.read_text())
    except OSError as e:
        raise DoorKeyError(f"cannot read the door key {path}: {e.strerror}") from e
    except DoorKeyError as e:
        raise DoorKeyError(f"{path}: {e}") from e


def write_new_door_key(path: Path) -> None:
    """A fresh key, written 0600 from the start."""
    write_private(path, secrets.token_hex(KEY_HEX_LENGTH // 2) + "\n")
