"""All the outside systems the agent talks to, at one base URL (the simulated world's)."""

from __future__ import annotations

import httpx

from replenisher.adapters.erp import HttpErp
from replenisher.adapters.manager import HttpManagerInbox
from replenisher.adapters.suppliers import HttpSuppliers
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.ports import ReplyReader


class HttpWorld:
    """Implements `replenisher.domain.ports.World`; a real ERP or supplier is another URL."""

    def __init__(
        self, base_url: str, client: httpx.AsyncClient | None = None, reader: ReplyReader | None = None
    ) -> None:
        self.base_url = base_url
        self.erp = HttpErp(base_url, client)
        self.suppliers = HttpSuppliers(base_url, client)
        self.manager = HttpManagerInbox(base_url, client)
        self.reader: ReplyReader = reader or OfflineReplyReader()
