"""The ERP's item and supplier masters, as the console reads them.

Two reads cover every SKU and supplier however many there are (`GET <erp>/erp/items`,
`GET <erp>/erp/suppliers`), kept for a few seconds so a page that refreshes itself does not
ask again each time; a page that names a SKU or supplier the kept copy lacks reads them again, so
one set up a moment ago shows at once. The console only shows these figures: the agents read stock themselves.
When the ERP cannot be reached the pages still load, with the figures left out.

A page of a long list reads only its own SKUs (`read_page`: `GET <erp>/erp/items?sku=...`, 100 a
read), and the supplier master as above: the whole item master of 100,000 SKUs takes seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import httpx
from pydantic import BaseModel, Field, ValidationError

from replenisher.domain.documents import StockLevel

_TIMEOUT = httpx.Timeout(10.0, connect=3.0)
FRESH_SECONDS = 10.0
PAGE_READ = 100  # SKUs one read of the item master names: the ERP's limit (`sku=` at most 100 times)


class ItemStock(StockLevel):
    daily_consumption: float = Field(default=0.0, ge=0, description="units a day, on the ERP's day")

    @property
    def days_of_cover(self) -> float | None:
        """How many days the stock on hand lasts at the usual consumption; None if nothing is consumed."""
        return self.on_hand / self.daily_consumption if self.daily_consumption > 0 else None

    @property
    def below_safety(self) -> bool:
        return self.on_hand < self.safety_stock


class _Items(BaseModel):
    items: list[ItemStock]


class _SupplierName(BaseModel):
    id: str
    name: str = Field(max_length=200)


class _Suppliers(BaseModel):
    suppliers: list[_SupplierName]


class Catalogue(BaseModel):
    items: dict[str, ItemStock] = Field(default_factory=dict)
    supplier_names: dict[str, str] = Field(default_factory=dict)
    read_at: float = 0.0
    error: str | None = Field(default=None, description="why the figures are missing, when they are")

    def supplier(self, supplier_id: str | None) -> str:
        """A supplier's name, or its id when the master does not know it."""
        if supplier_id is None:
            return "-"
        return self.supplier_names.get(supplier_id, supplier_id)

    def knows(self, skus: Iterable[str], suppliers: Iterable[str]) -> bool:
        return all(s in self.items for s in skus) and all(s in self.supplier_names for s in suppliers)


class ErpCatalogue:
    def __init__(self, url: str, client: httpx.AsyncClient | None = None, fresh_seconds: float = FRESH_SECONDS) -> None:
        self.url = url.rstrip("/")
        self._client = client or httpx.AsyncClient(timeout=_TIMEOUT)
        self._owns_client = client is None
        self.fresh_seconds = fresh_seconds
        self._last: Catalogue | None = None
        self._names: tuple[float, dict[str, str]] | None = None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def read(self, skus: Iterable[str] = (), suppliers: Iterable[str] = ()) -> Catalogue:
        """The masters, from the kept copy while it is fresh and knows every SKU and supplier asked
        about. One the ERP does not list is asked for again on each read: no worse than no copy."""
        now = time.monotonic()
        last = self._last
        if last is not None and now - last.read_at < self.fresh_seconds and last.knows(skus, suppliers):
            return last
        try:
            items = _Items.model_validate_json((await self._get("/erp/items")).content)
            suppliers = _Suppliers.model_validate_json((await self._get("/erp/suppliers")).content)
        except (httpx.HTTPError, ValidationError) as e:
            # Not kept: the next page asks again rather than showing a stale error for seconds.
            return Catalogue(error=f"the ERP's item master could not be read ({type(e).__name__})")
        self._last = Catalogue(
            items={i.sku: i for i in items.items},
            supplier_names={s.id: s.name for s in suppliers.suppliers},
            read_at=now,
        )
        return self._last

    async def read_page(self, skus: Iterable[str]) -> Catalogue:
        """These SKUs' figures now, read for them alone, and the supplier master (kept for a few seconds)."""
        wanted = sorted(set(skus))
        try:
            chunks = [wanted[i : i + PAGE_READ] for i in range(0, len(wanted), PAGE_READ)]
            reads = await asyncio.gather(*(self._get("/erp/items", params={"sku": chunk}) for chunk in chunks))
            items = [item for read in reads for item in _Items.model_validate_json(read.content).items]
            names = await self._supplier_names()
        except (httpx.HTTPError, ValidationError) as e:
            return Catalogue(error=f"the ERP's item master could not be read ({type(e).__name__})")
        return Catalogue(items={i.sku: i for i in items}, supplier_names=names, read_at=time.monotonic())

    async def _supplier_names(self) -> dict[str, str]:
        now = time.monotonic()
        kept = self._names
        if kept is not None and now - kept[0] < self.fresh_seconds:
            return kept[1]
        suppliers = _Suppliers.model_validate_json((await self._get("/erp/suppliers")).content)
        names = {s.id: s.name for s in suppliers.suppliers}
        self._names = (now, names)
        return names

    async def _get(self, path: str, params: dict[str, list[str]] | None = None) -> httpx.Response:
        response = await self._client.get(self.url + path, params=params)
        response.raise_for_status()
        return response
