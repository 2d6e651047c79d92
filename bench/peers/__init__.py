"""The systems under test, each written for its own engine: ours on Restate, Temporal, DBOS, plain asyncio.

All of them run the same replenishment loop (`loop.py`, over the pure rules in `replenisher.domain`)
and the same synthetic wake-up shape (`shape.py`), and answer the driver at the same URLs as
Restate's ingress (`gateway.py`), so the load generator is one piece of code for every system.
"""
