"""The loop in one process, on a simulated world in memory: the engine (`engine`) and the world (`world`).

No Restate and no HTTP, for the suites and scripts; Restate's engine is `replenisher.durable.restate_engine`.
"""
