"""The inbound endpoint's settings, from the environment (read once, at the first request)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replenisher.addresses import DEFAULT_INGRESS_URL, DEFAULT_WORLD_URL

DEFAULT_PORT = 9090
MAX_BODY_BYTES = 64 * 1024

_ENV = {
    "ingress_url": "REPLENISHER_INGRESS_URL",
    "secrets_file": "REPLENISHER_PARTY_SECRETS_FILE",
    "door_key_file": "REPLENISHER_DOOR_KEY_FILE",
    "replay_window_seconds": "REPLENISHER_INBOUND_REPLAY_WINDOW_SECONDS",
    "world_url": "REPLENISHER_WORLD_URL",
    "item_cache_seconds": "REPLENISHER_INBOUND_ITEM_CACHE_SECONDS",
    "rate_per_party": "REPLENISHER_INBOUND_RATE_PER_PARTY",
    "rate_per_party_and_sku": "REPLENISHER_INBOUND_RATE_PER_SKU",
    "tls_proxy": "REPLENISHER_INBOUND_TLS_PROXY",
}


class InboundSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    ingress_url: str = DEFAULT_INGRESS_URL
    """Restate's ingress, where authenticated messages are forwarded (`SkuAgent/<sku>/deliver`)."""
    secrets_file: Path
    """JSON of party to secret, mode 0600; the same file signs the world's messages."""
    door_key_file: Path
    """The key (64 hex characters, mode 0600) this door stamps its forwards with; the service has
    the same file, and believes a stated sender only under a stamp that checks (inbound/stamp.py)."""
    replay_window_seconds: float = Field(default=300.0, gt=0, le=86_400)
    """How far a request's timestamp may be from our clock; signatures are remembered this long."""
    world_url: str = DEFAULT_WORLD_URL
    """The ERP's item master (`GET /erp/items/<sku>`): which SKUs exist and which suppliers each lists."""
    item_cache_seconds: float = Field(default=60.0, ge=0, le=86_400)
    """How long the door keeps what the ERP said of a SKU's suppliers (0: ask every time)."""
    rate_per_party: float = Field(default=600.0, ge=0, le=1_000_000)
    """Messages a minute one party may send, all SKUs together (a minute's worth at once); 0: no limit."""
    rate_per_party_and_sku: float = Field(default=60.0, ge=0, le=1_000_000)
    """Messages a minute one party may send to one SKU; 0: no limit."""
    tls_proxy: bool = False
    """Behind a TLS-terminating proxy: every request must carry `x-forwarded-proto: https`, which
    the proxy sets; one without it reached the door some other way, in the clear, and is refused."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> InboundSettings:
        raw = {field: env[var] for field, var in _ENV.items() if env.get(var)}
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            problems = "; ".join(f"{_ENV.get(str(err['loc'][0]), err['loc'][0])}: {err['msg']}" for err in e.errors())
            raise SystemExit(f"invalid inbound settings: {problems}") from e
