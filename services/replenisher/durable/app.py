"""The replenisher service as an ASGI app, made by a factory that bootstraps:
`hypercorn 'replenisher.durable.app:create_app()'`, `granian --factory replenisher.durable.app:create_app`.

Nothing happens at import: `create_app` builds the parts (`replenisher.wiring.bootstrap`, from the
environment unless given), checks them, and serves every request with them.
"""

from __future__ import annotations

import json
from typing import Any

import restate
from restate.aws_lambda import is_running_on_lambda

from replenisher.config import audited_settings
from replenisher.durable.answered import noting_answers, service_answered
from replenisher.durable.archive import run_archive
from replenisher.durable.asgi import App, Receive, Scope, Send, cancel_on_disconnect
from replenisher.durable.audit_log import audit_log
from replenisher.durable.contracts import check_addresses
from replenisher.durable.replenish import replenish
from replenisher.durable.sku_agent import sku_agent
from replenisher.durable.sku_list import sku_list
from replenisher.loop import names
from replenisher.wiring import Wiring, bootstrap, serving

SERVICES = [sku_agent, replenish, run_archive, audit_log, service_answered, sku_list]

__all__ = ["SERVICES", "create_app"]


def create_app(parts: Wiring | None = None) -> Any:
    """The service with `parts` (default: `bootstrap()`, from the environment).

    Fails at start-up, not at the first decision, when the chosen decider cannot be called, or
    when a call between the services names a handler that is not there as addressed. On Lambda
    (AWS_LAMBDA_FUNCTION_NAME set) `restate.app` hands back the Lambda handler (event, context)
    rather than an ASGI app, and so does this.
    """
    parts = parts if parts is not None else bootstrap()
    parts.check()
    check_addresses(SERVICES)
    stamp_code_version(parts.settings.code_version, audited_settings(parts.settings))
    # With REPLENISHER_IDENTITY_KEYS set, a request not signed by one of those Restate servers gets 401.
    app = restate.app(services=SERVICES, identity_keys=list(parts.settings.identity_keys))
    if is_running_on_lambda():
        return _lambda_served(app, parts)
    # Wrapped so that an attempt Restate dropped stops at once under either server (durable/asgi.py).
    served = cancel_on_disconnect(app)
    if parts.settings.ingress_url:  # and so that an attempt after failed ones is noted (durable/answered.py)
        served = noting_answers(served, parts.settings.ingress_url)
    return _served(served, parts)


def stamp_code_version(version: str, settings: dict[str, str] | None = None) -> None:
    """Each service tells Restate, at discovery, the code version it runs (in its metadata): Restate
    keeps it with the deployment, so `replenisher deployments` can say which code each one runs
    even when no run on it has taken a turn. A process serves one version; the last app made wins."""
    for service in SERVICES:
        tag = service.service_tag
        tag.metadata = {**(tag.metadata or {}), names.CODE_VERSION_METADATA: version}
        if settings is not None:
            # And the settings an auditor asks about: `replenisher audit` records a change between deployments.
            tag.metadata[names.SETTINGS_METADATA] = json.dumps(settings, sort_keys=True, separators=(",", ":"))


def _served(app: App, parts: Wiring) -> App:
    async def with_parts(scope: Scope, receive: Receive, send: Send) -> None:
        # The handlers' tasks start inside, so every one of them sees these parts.
        with serving(parts):
            await app(scope, receive, send)

    return with_parts


def _lambda_served(handler: Any, parts: Wiring) -> Any:
    def with_parts(event: Any, context: Any) -> Any:
        # The SDK runs the invocation as a task made inside this call: it sees these parts.
        with serving(parts):
            return handler(event, context)

    return with_parts
