"""How the console signs people in: what the operator configures."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

MIN_SECRET = 32


class OidcSettings(BaseModel):
    """An OpenID Connect provider: the issuer's discovery document says the rest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: str = Field(
        description="e.g. https://login.example.com/realms/plant; its /.well-known/openid-configuration"
    )
    client_id: str = Field(min_length=1)
    client_secret: SecretStr
    label: str = Field(default="your company account", description="shown on the sign-in button")

    @field_validator("issuer")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the issuer must be an http(s) URL, not {value!r}")
        return value.rstrip("/")


class SignInSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    people_file: Path
    session_secret: SecretStr = Field(description="signs the session cookie; at least 32 characters")
    public_url: str = Field(
        description="where people reach the console, e.g. https://purchasing.plant.example (the OpenID "
        "provider redirects back to it, and a form posted from any other origin is refused)"
    )
    session_hours: float = Field(default=8.0, gt=0, le=24 * 7)
    oidc: OidcSettings | None = None
    personal_token_key_file: Path | None = Field(
        default=None,
        description="the key the service checks personal tokens with (its REPLENISHER_PERSONAL_TOKEN_KEY_FILE): "
        "with it the console makes them, for the CLI, and signs its own decisions with one",
    )

    @field_validator("session_secret")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < MIN_SECRET:
            raise ValueError(f"the session secret needs at least {MIN_SECRET} characters")
        return value

    @field_validator("public_url")
    @classmethod
    def _origin(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise ValueError(
                f"the public URL is a scheme and host (and port), like https://purchasing.example: {value!r}"
            )
        return f"{parts.scheme}://{parts.netloc}"

    @model_validator(mode="after")
    def _tls_beyond_loopback(self) -> SignInSettings:
        host = urlsplit(self.public_url).hostname or ""
        if self.public_url.startswith("http://") and host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(
                f"{self.public_url} is plain http beyond this machine: sessions would cross the network "
                "in the clear; serve the console behind TLS (https://)"
            )
        return self

    @property
    def secure_cookies(self) -> bool:
        return self.public_url.startswith("https://")

    @property
    def callback_url(self) -> str:
        return f"{self.public_url}/auth/callback"
