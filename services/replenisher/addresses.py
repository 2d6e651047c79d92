"""Where a local stack's parts listen unless told otherwise (`make up` binds them there).

The defaults the service's settings, the inbound endpoint, the CLI and the console share; each
is overridden by its own environment variable or option.
"""

DEFAULT_INGRESS_URL = "http://127.0.0.1:8080"
DEFAULT_ADMIN_URL = "http://127.0.0.1:9070"
DEFAULT_WORLD_URL = "http://127.0.0.1:9100"
