"""The loop in one process, on the simulated world in memory: the engine (`engine`) and the world (`world`,
the simulated world's own core behind the ports).

No Restate and no HTTP, for the suites and scripts; Restate's engine is `replenisher.durable.restate_engine`.
The service never imports this package (pyproject.toml's import contracts).
"""
