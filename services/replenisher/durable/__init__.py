"""The Restate glue: the SkuAgent virtual object, the Replenish workflow, the ASGI app."""
