"""The world's configuration, read from the environment when the app starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, model_validator

from replenisher.domain.calendar import BusinessCalendar, Instant, load_calendar
from simulated_world.catalogue import CatalogueName


class WorldSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    ingress_url: HttpUrl = HttpUrl("http://127.0.0.1:8080")
    """The Restate ingress that messages for SKUs are pushed to."""
    day_seconds: float = Field(default=86_400.0, gt=0)
    """Length of one business day: a real day by default, about a second in the demo."""
    catalogue: CatalogueName = "empty"
    inbound_url: HttpUrl | None = None
    """The replenisher's inbound endpoint: when set, every push goes there, signed as its party."""
    party_secrets_file: Path | None = None
    """The party secrets (the same file the inbound endpoint reads); required with `inbound_url`."""
    inbound_ca_file: Path | None = None
    """PEM certificates to trust for an `https` inbound URL besides the system's (a self-signed door's own)."""

    @model_validator(mode="after")
    def _secrets_with_inbound(self) -> WorldSettings:
        if self.inbound_url is not None and self.party_secrets_file is None:
            raise ValueError("WORLD_INBOUND_URL needs WORLD_PARTY_SECRETS_FILE to sign with")
        return self

    calendar_file: Path | None = None
    """The site calendar (the replenisher's `REPLENISHER_CALENDAR_FILE` format): suppliers count
    their reply and lead times in its business days. None: Monday to Friday, no holidays, UTC."""
    calendar: BusinessCalendar = Field(default_factory=BusinessCalendar, description="read from calendar_file")

    @model_validator(mode="before")
    @classmethod
    def _read_calendar(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("calendar_file") and "calendar" not in values:
            try:
                return {**values, "calendar": load_calendar(Path(values["calendar_file"]))}
            except OSError as e:
                raise ValueError(f"WORLD_CALENDAR_FILE: cannot read {values['calendar_file']}: {e.strerror}") from e
        return values

    clock_wall_origin: float | None = None
    """With `clock_calendar_origin`: the instant shared with the replenisher so both agree on the date."""
    # An ISO date-time too, read the same way as the replenisher's setting.
    clock_calendar_origin: Instant | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> WorldSettings:
        values = {
            field: env[var]
            for field, var in (
                ("ingress_url", "WORLD_INGRESS_URL"),
                ("day_seconds", "WORLD_DAY_SECONDS"),
                ("catalogue", "WORLD_CATALOGUE"),
                ("inbound_url", "WORLD_INBOUND_URL"),
                ("party_secrets_file", "WORLD_PARTY_SECRETS_FILE"),
                ("inbound_ca_file", "WORLD_INBOUND_CA_FILE"),
                ("calendar_file", "WORLD_CALENDAR_FILE"),
                ("clock_wall_origin", "WORLD_CLOCK_WALL_ORIGIN"),
                ("clock_calendar_origin", "WORLD_CLOCK_CALENDAR_ORIGIN"),
            )
            if env.get(var)
        }
        return cls.model_validate(values)
