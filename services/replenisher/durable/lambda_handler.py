"""The replenisher's services as an AWS Lambda function.

Handler: `replenisher.durable.lambda_handler.handler`. The same services and settings
(REPLENISHER_* environment variables of the function) as the ASGI app; Restate invokes the
function through the Lambda API with an API-Gateway-shaped event and talks to it in
request/response mode: each invocation runs until the handler finishes or has to wait,
then returns, and Restate calls it again with the journal when the wait is over.

With `REPLENISHER_ANTHROPIC_KEY_SOURCE` set (the template sets it from its key parameters), the
decider's key is read from AWS Secrets Manager or SSM Parameter Store here, at start, before the
settings are read: a function that cannot read its key fails its init, loudly, rather than run
without it. See `replenisher.aws_secrets`. Likewise the inbound endpoint's door key, with
`REPLENISHER_DOOR_KEY_SOURCE` (the template's `DoorKeyParameterName`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from restate.aws_lambda import is_running_on_lambda, wrap_asgi_as_lambda_handler

from replenisher.aws_secrets import SecretFetchError, load_door_key_into_env, load_key_into_env
from replenisher.durable.app import create_app


def create_handler() -> Any:
    """The keys read into the environment, then the app bootstrapped from it: the function's start.

    A function that cannot read its key fails its init, loudly, rather than run without it."""
    try:
        load_key_into_env(os.environ)
    except SecretFetchError as exc:
        raise SystemExit(f"the decider's key could not be read at start: {exc}") from exc
    try:
        # /tmp: the one place a function may write.
        load_door_key_into_env(os.environ, Path(tempfile.gettempdir()))
    except SecretFetchError as exc:
        raise SystemExit(f"the inbound endpoint's door key could not be read at start: {exc}") from exc
    app = create_app()
    # On Lambda (AWS_LAMBDA_FUNCTION_NAME is set) `create_app` already hands back the Lambda
    # handler, and wrapping it again would break it. Anywhere else it is the ASGI app.
    return app if is_running_on_lambda() else wrap_asgi_as_lambda_handler(app)


# Lambda imports this module in the function's init phase and calls `handler` per invocation:
# its start-up is this import, the one place the service is built when the module loads.
handler: Any = create_handler()
