"""The manager's web console: the approval inbox, the SKUs, and each run's timeline.

Plain ASGI (`replenisher.console.app:app`) served by hypercorn; `replenisher console` starts it.
The inbox and the SKU overview are also what the CLI's `approve`, `reject` and `skus` use.
"""
