"""The operator layer: what the CLI and the console do for people, apart from how they show it.

Each use case is a small module that takes its ports as arguments (the Restate client, the
manager's inbox, the ERP's catalogue, the time now), returns pydantic models and renders
nothing: `inbox` (pending approvals), `decide` (approve or reject), `status` (one SKU),
`overview` (every SKU), `spend`, `cost`, `outcomes`, `timelines`, and `agent_calls` (check,
watch, unwatch, deliver); `catalogue` reads the ERP's item master beside the manager's inbox.
`restate/` reads what Restate knows,
split by job: the ingress client with its outage handling, the service's health, paused
calls, the agents' state, and the SQL read models.
"""
