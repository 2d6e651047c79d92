"""The replenisher's services as an AWS Lambda function.

Handler: `replenisher.durable.lambda_handler.handler`. The same services and settings
(REPLENISHER_* environment variables of the function) as the ASGI app; Restate invokes the
function through the Lambda API with an API-Gateway-shaped event and talks to it in
request/response mode: each invocation runs until the handler finishes or has to wait,
then returns, and Restate calls it again with the journal when the wait is over.
"""

from __future__ import annotations

from typing import Any

from restate.aws_lambda import is_running_on_lambda, wrap_asgi_as_lambda_handler

from replenisher.durable.app import app

# On Lambda (AWS_LAMBDA_FUNCTION_NAME is set) `restate.app` already hands back the Lambda
# handler, and wrapping it again would break it. Anywhere else `app` is the ASGI app.
handler: Any = app if is_running_on_lambda() else wrap_asgi_as_lambda_handler(app)
