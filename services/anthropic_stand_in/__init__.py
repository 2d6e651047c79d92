"""A stand-in for the Anthropic Messages API: scripted answers to real requests, over HTTP.

Not a model and not part of the service: the tests and the bench serve it (`STAND_IN_APP`, an
ASGI app) and point the real `anthropic` client at it through `REPLENISHER_ANTHROPIC_BASE_URL`;
its `/admin/requests` log is what it received, counted independently of the service's ledger.
"""

STAND_IN_APP = "anthropic_stand_in.app:app"
