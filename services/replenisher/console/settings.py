"""The console's settings: where Restate and the manager's inbox answer, and how money is shown.

The console takes them as an argument; whoever builds it decides where they come from:
`replenisher console` from its flags and the environment, the ASGI entry point
(`replenisher.console.app:app`) from the environment alone, a test from its own values.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from replenisher.addresses import DEFAULT_ADMIN_URL, DEFAULT_INGRESS_URL, DEFAULT_WORLD_URL


class ConsoleSettings(BaseModel):
    ingress_url: str = DEFAULT_INGRESS_URL
    admin_url: str = DEFAULT_ADMIN_URL
    inbox_url: str = Field(default=DEFAULT_WORLD_URL, description="the manager's inbox, and the ERP beside it")
    # Prices carry no currency of their own (a unit price in the SKU's currency): say which it is.
    currency: str = Field(default="USD", max_length=8)
    confirm_above: float = Field(default=1000.0, description="an approval above this total asks to be confirmed")

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
        )
