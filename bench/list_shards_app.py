"""The product's `SkuList` object alone, for `bench.list_shards`: the list's shards with no agents beside them."""

from __future__ import annotations

import restate

from replenisher.durable.sku_list import sku_list

app = restate.app([sku_list])
