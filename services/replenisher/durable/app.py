"""The replenisher service as an ASGI app: `hypercorn replenisher.durable.app:app`."""

import restate
from restate.aws_lambda import is_running_on_lambda

from replenisher.durable.archive import run_archive
from replenisher.durable.asgi import cancel_on_disconnect
from replenisher.durable.contracts import check_addresses
from replenisher.durable.replenish import replenish
from replenisher.durable.sku_agent import sku_agent
from replenisher.wiring import wiring

SERVICES = [sku_agent, replenish, run_archive]
# Fail at start-up, not at the first decision, when the chosen decider cannot be called, or
# when a call between the services names a handler that is not there as addressed.
wiring().check()
check_addresses(SERVICES)
# With REPLENISHER_IDENTITY_KEYS set, a request not signed by one of those Restate servers gets 401.
_app = restate.app(services=SERVICES, identity_keys=list(wiring().settings.identity_keys))
# Wrapped so that an attempt Restate dropped stops at once under either server (durable/asgi.py).
# On Lambda `restate.app` hands back the Lambda handler itself (event, context): there is no
# stream to drop, and wrapping it as ASGI would break every invocation.
app = _app if is_running_on_lambda() else cancel_on_disconnect(_app)
