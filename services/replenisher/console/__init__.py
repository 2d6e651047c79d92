"""The manager's web console: the approval inbox, the SKUs, and each run's timeline.

A Starlette app (`replenisher.console.app:app`) served by hypercorn; `replenisher console` starts it.
Its pages render from the Jinja2 templates in `templates/`, its stylesheet and scripts are in `static/`.
The inbox and the SKU overview are also what the CLI's `approve`, `reject` and `skus` use.
"""
