"""The turn loop, once: `replenish(engine, request)` over the `Engine` protocol (see `engine`).

Restate runs it in `durable/replenish.py`; the in-memory engine the suites use, the replay
engine and the benchmark's peers run the same function on their own engines.
"""

from replenisher.loop.engine import Effect, Engine, RunStopped, StepFailed
from replenisher.loop.request import AdoptedOrder, CurrentWait, Envelope, RunRequest
from replenisher.loop.run import replenish

__all__ = [
    "AdoptedOrder",
    "CurrentWait",
    "Effect",
    "Engine",
    "Envelope",
    "RunRequest",
    "RunStopped",
    "StepFailed",
    "replenish",
]
