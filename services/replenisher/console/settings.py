"""The console's settings: where Restate and the manager's inbox answer, and how money is shown.

The console takes them as an argument; whoever builds it decides where they come from:
`replenisher console` from its flags and the environment, the ASGI entry point
(`replenisher.console.app:create_app()`) from the environment alone, a test from its own values.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from replenisher.addresses import DEFAULT_ADMIN_URL, DEFAULT_INGRESS_URL, DEFAULT_WORLD_URL
from replenisher.identity.settings import OidcSettings, SignInSettings

PEOPLE_FILE_ENV = "REPLENISHER_PEOPLE_FILE"
SESSION_SECRET_ENV = "REPLENISHER_CONSOLE_SESSION_SECRET"
PUBLIC_URL_ENV = "REPLENISHER_CONSOLE_PUBLIC_URL"
SIGN_IN_ENV = {
    "session_secret": SESSION_SECRET_ENV,
    "public_url": PUBLIC_URL_ENV,
    "session_hours": "REPLENISHER_CONSOLE_SESSION_HOURS",
    "personal_token_key_file": "REPLENISHER_PERSONAL_TOKEN_KEY_FILE",
}
OIDC_ENV = {
    "issuer": "REPLENISHER_OIDC_ISSUER",
    "client_id": "REPLENISHER_OIDC_CLIENT_ID",
    "client_secret": "REPLENISHER_OIDC_CLIENT_SECRET",
    "label": "REPLENISHER_OIDC_LABEL",
}


class ConsoleSettingsError(ValueError):
    """A console setting is missing or wrong; the message names the variable."""


class ConsoleSettings(BaseModel):
    ingress_url: str = DEFAULT_INGRESS_URL
    admin_url: str = DEFAULT_ADMIN_URL
    inbox_url: str = Field(default=DEFAULT_WORLD_URL, description="the manager's inbox, and the ERP beside it")
    # Prices carry no currency of their own (a unit price in the SKU's currency): say which it is.
    currency: str = Field(default="USD", max_length=8)
    confirm_above: float = Field(default=1000.0, description="an approval above this total asks to be confirmed")
    sign_in: SignInSettings | None = Field(
        default=None, description="people sign in (REPLENISHER_PEOPLE_FILE set); None: no sign-in, loopback only"
    )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> ConsoleSettings:
        """REPLENISHER_INGRESS_URL, REPLENISHER_ADMIN_URL and REPLENISHER_WORLD_URL (as the service is
        configured), REPLENISHER_CURRENCY and REPLENISHER_CONSOLE_CONFIRM_ABOVE; defaults otherwise."""
        return cls(
            ingress_url=environ.get("REPLENISHER_INGRESS_URL", DEFAULT_INGRESS_URL),
            admin_url=environ.get("REPLENISHER_ADMIN_URL", DEFAULT_ADMIN_URL),
            inbox_url=environ.get("REPLENISHER_WORLD_URL", DEFAULT_WORLD_URL),
            currency=environ.get("REPLENISHER_CURRENCY", "USD")[:8],
            confirm_above=float(environ.get("REPLENISHER_CONSOLE_CONFIRM_ABOVE", "1000")),
            sign_in=sign_in_from(environ),
        )


def sign_in_from(environ: Mapping[str, str]) -> SignInSettings | None:
    """Sign-in is on when REPLENISHER_PEOPLE_FILE names the authority matrix; it then needs the
    session secret and the console's public URL, and takes an OpenID provider if one is named."""
    people = environ.get(PEOPLE_FILE_ENV, "").strip()
    if not people:
        return None
    values: dict[str, object] = {"people_file": Path(people)}
    for field, name in SIGN_IN_ENV.items():
        if environ.get(name, "").strip():
            values[field] = environ[name].strip()
    oidc = {field: environ[name].strip() for field, name in OIDC_ENV.items() if environ.get(name, "").strip()}
    try:
        if oidc:
            values["oidc"] = OidcSettings.model_validate(oidc)
        return SignInSettings.model_validate(values)
    except ValidationError as e:
        problems = []
        for item in e.errors(include_url=False):
            field = str(item["loc"][0]) if item["loc"] else ""
            name = SIGN_IN_ENV.get(field) or OIDC_ENV.get(field) or ""
            message = item["msg"].removeprefix("Value error, ")
            if item["type"] == "missing":
                message = f"is required when {PEOPLE_FILE_ENV} is set"
            problems.append(f"{name}: {message}" if name else message)
        raise ConsoleSettingsError("sign-in settings: " + "; ".join(problems)) from None
