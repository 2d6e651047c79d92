"""Which decider picks the tools: the offline policy unless configured otherwise."""

from __future__ import annotations

from functools import cache

from replenisher.config import settings
from replenisher.domain.decisions import Decider
from replenisher.domain.policy import OfflinePolicy


@cache
def current_decider() -> Decider:
    choice = settings().decider
    if choice == "offline":
        return OfflinePolicy()
    raise SystemExit(f"REPLENISHER_DECIDER={choice!r} is not available in this build; use 'offline'")
