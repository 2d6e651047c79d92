"""The inbound endpoint's settings, from the environment (read once, at the first request)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replenisher.config import DEFAULT_INGRESS_URL

DEFAULT_PORT = 9090
MAX_BODY_BYTES = 64 * 1024

_ENV = {
    "ingress_url": "REPLENISHER_INGRESS_URL",
    "secrets_file": "REPLENISHER_PARTY_SECRETS_FILE",
    "replay_window_seconds": "REPLENISHER_INBOUND_REPLAY_WINDOW_SECONDS",
}


class InboundSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    ingress_url: str = DEFAULT_INGRESS_URL
    """Restate's ingress, where authenticated messages are forwarded (`SkuAgent/<sku>/deliver`)."""
    secrets_file: Path
    """JSON of party to secret, mode 0600; the same file signs the world's messages."""
    replay_window_seconds: float = Field(default=300.0, gt=0, le=86_400)
    """How far a request's timestamp may be from our clock; signatures are remembered this long."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> InboundSettings:
        raw = {field: env[var] for field, var in _ENV.items() if env.get(var)}
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            problems = "; ".join(f"{_ENV.get(str(err['loc'][0]), err['loc'][0])}: {err['msg']}" for err in e.errors())
            raise SystemExit(f"invalid inbound settings: {problems}") from e
