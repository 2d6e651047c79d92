"""All the outside systems the agent talks to, at one base URL (the simulated world's)."""

from __future__ import annotations

import time

import httpx

from replenisher.adapters.erp import HttpErp
from replenisher.adapters.http import LoopClient
from replenisher.adapters.manager import HttpManagerInbox
from replenisher.adapters.suppliers import HttpSuppliers
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.ports import Clock, ReplyReader, Roster


class HttpWorld:
    """Implements `replenisher.domain.ports.World`; a real ERP or supplier is another URL.

    Its adapters share one client (the one given, else a `LoopClient` of its own); its clock is
    the real one unless another is given."""

    def __init__(
        self,
        base_url: str,
        client: httpx.AsyncClient | LoopClient | None = None,
        reader: ReplyReader | None = None,
        clock: Clock = time.time,
        people: Roster | None = None,
    ) -> None:
        self.base_url = base_url
        shared = client if client is not None else LoopClient()
        self.erp = HttpErp(base_url, shared)
        self.suppliers = HttpSuppliers(base_url, shared)
        self.manager = HttpManagerInbox(base_url, shared)
        self.reader: ReplyReader = reader or OfflineReplyReader()
        self.clock: Clock = clock
        self.people: Roster | None = people
