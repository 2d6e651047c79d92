"""The manager's web console: the approval inbox, the SKUs, and each run's timeline.

A Starlette app (`replenisher.console.app:create_app()`) served by hypercorn; `replenisher console` starts it.
Its pages render from the Jinja2 templates in `templates/`, its stylesheet and scripts are in `static/`.
What the pages show comes from the operator layer (`replenisher.operations`), which the CLI uses too.
"""
