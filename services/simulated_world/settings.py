"""The world's configuration, read from the environment when the app starts."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

from simulated_world.catalogue import CatalogueName


class WorldSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    ingress_url: HttpUrl = HttpUrl("http://127.0.0.1:8080")
    """The Restate ingress that messages for SKUs are pushed to."""
    day_seconds: float = Field(default=86_400.0, gt=0)
    """Length of one business day: a real day by default, about a second in the demo."""
    catalogue: CatalogueName = "empty"

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> WorldSettings:
        values = {
            field: env[var]
            for field, var in (
                ("ingress_url", "WORLD_INGRESS_URL"),
                ("day_seconds", "WORLD_DAY_SECONDS"),
                ("catalogue", "WORLD_CATALOGUE"),
            )
            if env.get(var)
        }
        return cls.model_validate(values)
