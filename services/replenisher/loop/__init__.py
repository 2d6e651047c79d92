"""The turn loop, once: `replenish(engine, request)` over the `Engine` protocol (see `engine`).

An engine is whatever the loop runs on. Restate's (`durable/restate_engine.py`) runs it in
`durable/replenish.py`; the in-memory one the suites use (`in_memory/engine.py`), the one that
plays a recorded run back (`replay/playback.py`) and the benchmark's peers run the same function.
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
