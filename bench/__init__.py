"""Benchmarks: wake-up, idle cost and throughput of the replenisher beside Temporal, DBOS and a plain asyncio floor.

Run with `make bench` (full) or `make bench-quick`; results go to bench/results/.
"""
