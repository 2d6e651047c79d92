"""The replenisher service as an ASGI app: `hypercorn replenisher.durable.app:app`."""

import restate

from replenisher.durable.replenish import replenish
from replenisher.durable.sku_agent import sku_agent

app = restate.app(services=[sku_agent, replenish])
