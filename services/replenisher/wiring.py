"""The composition root: `bootstrap(...)` builds one app's parts (settings, decider, reply reader,
the outside world over one HTTP client, the clock, the archive) in one place.

Every part has a default, built from the settings (`config.load_settings`, pydantic-settings over
the environment), which a test or a tool overrides by argument:

    parts = bootstrap(decider=my_decider, world=my_world)   # the rest from the environment
    parts = bootstrap(load_settings(world_url=url))          # settings of its own

Each part is built on first use (the Anthropic SDK takes seconds to import, and is imported only
when Claude is chosen) and kept by the `Wiring` that `bootstrap` returned, never by a module:
nothing is cached per process, so nothing needs clearing. The service's ASGI app is made by a
factory that bootstraps (`replenisher.durable.app.create_app`) and serves each request with its
parts (`serving`): Restate's handlers ask `wiring()` for the parts of the app serving them.

`REPLENISHER_DECIDER=claude` selects the Claude decider, with the model id from
`REPLENISHER_CLAUDE_MODEL` and the key from `ANTHROPIC_API_KEY`; it then also reads supplier
replies (a tool-less model call) unless `REPLENISHER_CLAUDE_READ_REPLIES=false`. The offline
policy is the default (no model, no key).

Those settings choose the decider of NEW runs: `decider_terms()` is fixed into a run's request
when it starts, and the run is served by `decider_for`/`world_for` its terms to its end,
whatever the service is restarted with meanwhile. Only the connection (key, base URL, client
retries and timeout) is the running service's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replenisher.config import Settings, load_settings
from replenisher.domain.authority import AuthorityMatrix
from replenisher.domain.costs import ModelPrice
from replenisher.domain.decisions import Decider, DeciderTerms, Decision, Refusal
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.policy import OfflinePolicy
from replenisher.domain.ports import Clock, Rejected, ReplyReader, World
from replenisher.domain.state import State
from replenisher.domain.tools import Tool

if TYPE_CHECKING:
    import anthropic

    from replenisher.adapters.http import LoopClient
    from replenisher.adapters.people_file import MatrixFile
    from replenisher.loop.archiving import ArchiveSink

ArchiveFor = Callable[[Any], "ArchiveSink"]
"""Where a run's archive goes, given the run's context (Restate's: `RestateArchiveSink`)."""


def check_claude_settings(s: Settings) -> None:
    """Fail at start-up, not at the first decision, when Claude is chosen but cannot be called."""
    if s.decider == "claude" and (s.anthropic_api_key is None or not s.anthropic_api_key.get_secret_value()):
        raise SystemExit("REPLENISHER_DECIDER=claude needs ANTHROPIC_API_KEY in the service's environment")


def price_override(s: Settings) -> ModelPrice | None:
    if s.claude_input_usd_per_mtok is None or s.claude_output_usd_per_mtok is None:
        return None
    return ModelPrice(input_per_mtok=s.claude_input_usd_per_mtok, output_per_mtok=s.claude_output_usd_per_mtok)


class ModelNotConfigured:
    """A run fixed to Claude on a service that has no key: every ask is refused, so the rules
    take its turns (never another model, never a silent switch to the service's decider)."""

    name = "claude"

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision:
        raise Rejected(503, "this run is fixed to the claude decider, and this service has no ANTHROPIC_API_KEY")


class Wiring:
    """One app's parts (`bootstrap`): any part given is used as is; the others are built from the
    settings, each on first use. The settings themselves are read when the parts are made."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        decider: Decider | None = None,
        reader: ReplyReader | None = None,
        world: World | None = None,
        http: LoopClient | None = None,
        clock: Clock | None = None,
        archive: ArchiveFor | None = None,
        authority: AuthorityMatrix | None = None,
    ) -> None:
        self.settings: Settings = settings if settings is not None else load_settings()
        # A run's parts by its pinned terms, shared by the runs that have the same.
        self._by_terms: dict[str, tuple[Decider, ReplyReader, World]] = {}
        self.clock: Clock = clock if clock is not None else time.time
        """The wall clock: the worlds' (the tools stamp their results with it) and the durable steps'."""
        self.archive: ArchiveFor | None = archive
        """Where runs keep their archives; None: the engine's own (Restate's run state, then `RunArchive`)."""
        self.authority: AuthorityMatrix | MatrixFile | None = authority if authority is not None else self.people_file()
        """The authority matrix (`REPLENISHER_PEOPLE_FILE`, re-read when the file changes): in force for the
        runs started while it is given, which read from it whom to ask and, as each decision arrives,
        its approver's standing. None: opt out."""
        if decider is not None:
            self.decider = decider
        if reader is not None:
            self.reader = reader
        if world is not None:
            self.world = world
        if http is not None:
            self.http = http

    def people_file(self) -> AuthorityMatrix | MatrixFile | None:
        """The settings' matrix: its file, re-read when it changes, or as given when it has no file."""
        s = self.settings
        if s.people is None or not s.people_file:
            return s.people
        from replenisher.adapters.people_file import MatrixFile

        return MatrixFile(Path(s.people_file), loaded=s.people)

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
    def http(self) -> LoopClient:
        """The one HTTP client of every world these parts build (remade on another event loop)."""
        from replenisher.adapters.http import LoopClient

        return LoopClient()

    def http_world(self, reader: ReplyReader) -> World:
        from replenisher.adapters.world import HttpWorld

        return HttpWorld(self.settings.world_url, self.http, reader=reader, clock=self.clock, people=self.authority)

    @cached_property
    def world(self) -> World:
        return self.http_world(self.reader)

    def decider_terms(self) -> DeciderTerms:
        """The decider a new run is fixed to, from these settings: recorded in its request when it
        starts (decider, model, price, max tokens, reply reading, asks per turn, budget), so a
        restart with other settings changes new runs only."""
        s = self.settings
        if s.decider == "offline":
            return DeciderTerms(decider="offline")
        return DeciderTerms(
            decider="claude",
            model=s.claude_model,
            max_tokens=s.claude_max_tokens,
            read_replies=s.claude_read_replies,
            price=price_override(s),
            asks_per_turn=s.claude_asks_per_turn,
            budget_usd=s.claude_budget_usd,
            skip_single=True,
        )

    def pinned(self, terms: DeciderTerms) -> DeciderTerms:
        """The terms a run asks by: its own; a run from before pinning follows this service's decider."""
        if terms.decider is not None:
            return terms
        # Its journal has an ask for every turn: skipping one now would not replay.
        fixed = {"asks_per_turn": terms.asks_per_turn, "budget_usd": terms.budget_usd, "skip_single": False}
        return self.decider_terms().model_copy(update=fixed)

    def _has_key(self) -> bool:
        key = self.settings.anthropic_api_key
        return key is not None and bool(key.get_secret_value())

    @cached_property
    def _own_terms(self) -> DeciderTerms:
        """This service's own terms, pinned: built once, not on every step of every run."""
        return self.pinned(self.decider_terms())

    def _parts_for(self, terms: DeciderTerms) -> tuple[Decider, ReplyReader, World]:
        """A run's decider, reader and world, by its pinned terms (shared by the runs that have the same)."""
        terms = self.pinned(terms)
        if terms == self._own_terms:
            # This service's own settings: the parts it was given or built.
            return self.decider, self.reader, self.world
        key = terms.model_dump_json()
        if key not in self._by_terms:
            decider: Decider
            reader: ReplyReader = OfflineReplyReader()
            if terms.decider == "claude" and not self._has_key():
                decider = ModelNotConfigured()
            elif terms.decider == "claude":
                from replenisher.deciders.claude import ClaudeDecider, ClaudeReplyReader

                assert terms.model is not None
                decider = ClaudeDecider(self.claude_client, terms.model, max_tokens=terms.max_tokens, price=terms.price)
                if terms.read_replies:
                    reader = ClaudeReplyReader(
                        self.claude_client, terms.model, price=terms.price, budget_usd=terms.budget_usd
                    )
            else:
                decider = OfflinePolicy()
            self._by_terms[key] = (decider, reader, self.http_world(reader))
        return self._by_terms[key]

    def decider_for(self, terms: DeciderTerms) -> Decider:
        return self._parts_for(terms)[0]

    def reader_for(self, terms: DeciderTerms) -> ReplyReader:
        return self._parts_for(terms)[1]

    def world_for(self, terms: DeciderTerms) -> World:
        """The outside world for a run: its replies read by the reader its terms name."""
        return self._parts_for(terms)[2]

    def check(self) -> None:
        """What must hold before the service takes its first request."""
        check_claude_settings(self.settings)


bootstrap = Wiring
"""`bootstrap(settings=None, *, decider=, reader=, world=, http=, clock=, archive=, authority=)`: an app's parts,
those given, the rest built (on first use) from `settings`, by default the environment's now
(`load_settings`: a bad value stops here, naming its variable)."""


_serving: ContextVar[Wiring] = ContextVar("replenisher_parts")
"""The parts of the app serving the request at hand: set per request by that app (`serving`),
read by its handlers. Not a cache: outside a request of an app, there are none."""


@contextmanager
def serving(parts: Wiring) -> Iterator[Wiring]:
    """Inside the block (and the tasks it starts), `wiring()` answers with `parts`."""
    token = _serving.set(parts)
    try:
        yield parts
    finally:
        _serving.reset(token)


def wiring() -> Wiring:
    """The parts of the app serving this request (see `serving`)."""
    try:
        return _serving.get()
    except LookupError:
        raise RuntimeError(
            "no app is serving here: build the parts with bootstrap() and serve through them "
            "(replenisher.durable.app.create_app, or `with serving(parts):`)"
        ) from None


def settings() -> Settings:
    """The settings of the app serving this request."""
    return wiring().settings


def override(replacement: Wiring | None = None) -> contextlib.AbstractContextManager[Wiring]:
    """`serving(replacement)`, by default a fresh `bootstrap()` read from the environment as it is now."""
    return serving(replacement if replacement is not None else bootstrap())
