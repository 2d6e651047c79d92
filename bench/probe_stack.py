"""A probe bench's stack: a restate-server of its own and one app, started in order, the app registered,
and both stopped on the way out however it ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from replenisher.stack.admin import register_deployment
from replenisher.stack.processes import AsgiApp, ManagedProcess
from replenisher.stack.runtime import BinaryRuntime


@contextmanager
def running(restate: BinaryRuntime, app: AsgiApp) -> Iterator[None]:
    started: list[ManagedProcess] = []
    try:
        for process in (restate, app):
            process.start()
            started.append(process)
            process.wait_ready()
        register_deployment(restate.admin_url, restate.deployment_uri(app.port))
        yield
    finally:
        for process in reversed(started):
            process.stop()
