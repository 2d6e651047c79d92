"""One TLS context per process for the stack's own short HTTP calls.

httpx builds a new SSL context, reading the whole CA bundle, for every client it makes
(`httpx.get` makes one per call): about 30 ms of CPU each time. The stack makes a client for
every readiness poll (every 50 ms while a server starts) and every admin query, so a poller
waiting for a server to start took more than half a core from the server it was waiting for.
Handing httpx a context built once costs 0.1 ms per client instead.

A context is shared only as built here: nothing loads a client certificate into it.
"""

from __future__ import annotations

import ssl
from functools import cache

import httpx


def context(verify: bool = True) -> ssl.SSLContext:
    """httpx's own default context (its CA bundle), or with `verify=False` one that checks no
    certificate (a readiness poll asks whether a server serves, not whom to trust)."""
    return _built(verify)


@cache  # keyed by the one flag, however the caller passed it
def _built(verify: bool) -> ssl.SSLContext:
    return httpx.create_ssl_context(verify=verify)
