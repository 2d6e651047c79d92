"""Stock Replenisher: a durable purchasing agent per SKU, on Restate."""
