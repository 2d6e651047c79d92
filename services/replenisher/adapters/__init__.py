"""httpx adapters for the outside world: ERP, suppliers, the manager's inbox."""

from replenisher.adapters.erp import HttpErp
from replenisher.adapters.errors import Rejected, UnexpectedResponse
from replenisher.adapters.http import LoopClient
from replenisher.adapters.manager import HttpManagerInbox
from replenisher.adapters.suppliers import HttpSuppliers
from replenisher.adapters.world import HttpWorld

__all__ = [
    "HttpErp",
    "HttpManagerInbox",
    "HttpSuppliers",
    "HttpWorld",
    "LoopClient",
    "Rejected",
    "UnexpectedResponse",
]
