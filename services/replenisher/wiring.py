"""The composition root: the settings, the decider, the reply reader and the outside world, built in one place.

The service, the CLI and the scripts take their parts from `wiring()`: one `Wiring` per
process, built lazily from the environment (`config.load_settings`), each part on first use
(the Anthropic SDK takes seconds to import, and is imported only when Claude is chosen).
Nothing else caches a part of it, so nothing else needs clearing.

Tests (and tools that need other parts) say so with `override`:

    with override(Wiring(decider=my_decider, world=my_world)):
        ...  # every wiring() here answers with those parts; the rest still from the environment

    with override():  # a fresh wiring that reads the environment as it is now (e.g. after monkeypatch.setenv)
        ...

`REPLENISHER_DECIDER=claude` selects the Claude decider, with the model id from
`REPLENISHER_CLAUDE_MODEL` and the key from `ANTHROPIC_API_KEY`; it then also reads supplier
replies (a tool-less model call) unless `REPLENISHER_CLAUDE_READ_REPLIES=false`. The offline
policy is the default (no model, no key).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING

from replenisher.config import Settings, load_settings
from replenisher.domain.costs import ModelPrice
from replenisher.domain.decisions import Decider, DeciderTerms
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.policy import OfflinePolicy
from replenisher.domain.ports import ReplyReader, World

if TYPE_CHECKING:
    import anthropic


def check_claude_settings(s: Settings) -> None:
    """Fail at start-up, not at the first decision, when Claude is chosen but cannot be called."""
    if s.decider == "claude" and (s.anthropic_api_key is None or not s.anthropic_api_key.get_secret_value()):
        raise SystemExit("REPLENISHER_DECIDER=claude needs ANTHROPIC_API_KEY in the service's environment")


def price_override(s: Settings) -> ModelPrice | None:
    if s.claude_input_usd_per_mtok is None or s.claude_output_usd_per_mtok is None:
        return None
    return ModelPrice(input_per_mtok=s.claude_input_usd_per_mtok, output_per_mtok=s.claude_output_usd_per_mtok)


class Wiring:
    """One process's parts. Any part given is used as is; the others are built from the settings."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        decider: Decider | None = None,
        reader: ReplyReader | None = None,
        world: World | None = None,
    ) -> None:
        self._given_settings = settings
        if decider is not None:
            self.decider = decider
        if reader is not None:
            self.reader = reader
        if world is not None:
            self.world = world

    @cached_property
    def settings(self) -> Settings:
        return self._given_settings if self._given_settings is not None else load_settings()

    @cached_property
    def claude_client(self) -> anthropic.AsyncAnthropic:
        from replenisher.deciders.claude import make_client

        s = self.settings
        check_claude_settings(s)
        assert s.anthropic_api_key is not None
        return make_client(
            s.anthropic_api_key.get_secret_value(),
            base_url=s.anthropic_base_url,
            max_retries=s.claude_max_retries,
            timeout_seconds=s.claude_timeout_seconds,
        )

    @cached_property
    def decider(self) -> Decider:
        s = self.settings
        if s.decider == "claude":
            from replenisher.deciders.claude import ClaudeDecider

            return ClaudeDecider(
                self.claude_client, s.claude_model, max_tokens=s.claude_max_tokens, price=price_override(s)
            )
        return OfflinePolicy()

    @cached_property
    def reader(self) -> ReplyReader:
        s = self.settings
        if s.decider == "claude" and s.claude_read_replies:
            from replenisher.deciders.claude import ClaudeReplyReader

            return ClaudeReplyReader(
                self.claude_client, s.claude_model, price=price_override(s), budget_usd=s.claude_budget_usd
            )
        return OfflineReplyReader()

    @cached_property
    def world(self) -> World:
        from replenisher.adapters.world import HttpWorld

        return HttpWorld(self.settings.world_url, reader=self.reader)

    def decider_terms(self) -> DeciderTerms:
        """How runs use the decider; fixed into each run's request when it starts."""
        s = self.settings
        if s.decider == "offline":
            return DeciderTerms()
        return DeciderTerms(asks_per_turn=s.claude_asks_per_turn, budget_usd=s.claude_budget_usd)

    def check(self) -> None:
        """What must hold before the service takes its first request."""
        check_claude_settings(self.settings)


_current: Wiring | None = None


def wiring() -> Wiring:
    global _current
    if _current is None:
        _current = Wiring()
    return _current


@contextmanager
def override(replacement: Wiring | None = None) -> Iterator[Wiring]:
    """Use `replacement` (default: a fresh `Wiring()`, read from the environment as it is now) inside the block."""
    global _current
    previous, _current = _current, replacement if replacement is not None else Wiring()
    try:
        yield _current
    finally:
        _current = previous
