"""`python -m bench.engine_memory` (bench/engine_memory.py): how it reads RocksDB's memory from
Restate's metrics and splits the engine's growth per waiting run. The bench itself runs for
minutes, so it is not run here; the idle-cost points it reads come from the main bench's code."""

from __future__ import annotations

import pytest
from bench.engine_memory import growth, growth_line, point_line, rocksdb_figures

# Lines as restate-server 1.7.12 writes them at /metrics (its node port), one database each.
METRICS = """\
# HELP restate_rocksdb_block_cache_usage_bytes Block cache usage
restate_rocksdb_block_cache_usage_bytes{cluster_name="localcluster",node_name="n",db="log-server"} 37748736
restate_rocksdb_block_cache_usage_bytes{cluster_name="localcluster",node_name="n",db="db"} 37748736
restate_rocksdb_block_cache_capacity_bytes{cluster_name="localcluster",node_name="n",db="db"} 268435456
restate_rocksdb_block_cache_hit_total{cluster_name="localcluster",node_name="n",db="db"} 12
restate_rocksdb_memory_write_buffer_manager_usage_bytes{cluster_name="localcluster",node_name="n"} 35651584
restate_rocksdb_memory_approx_memtable_bytes{cluster_name="localcluster",node_name="n",db="log-server"} 6291456
restate_rocksdb_memory_approx_memtable_bytes{cluster_name="localcluster",node_name="n",db="db"} 18874368
restate_invoker_inflight 3
"""


def test_the_shared_cache_is_read_once_and_the_memtables_are_summed_over_the_databases() -> None:
    figures = rocksdb_figures(METRICS)
    # One block cache for every database: its use is 36 MiB, not twice that.
    assert figures["block_cache_usage"] == 36.0 and figures["block_cache_capacity"] == 256.0
    assert figures["memory_approx_memtable"] == 24.0, "6 MiB + 18 MiB"
    assert figures["memory_write_buffer_manager_usage"] == 34.0
    assert "block_cache_hit_total" not in figures and not any("invoker" in k for k in figures), "counters left out"


def point(waiting: int, rss_mb: float, cache_mb: float) -> dict:
    return {
        "waiting": waiting,
        "memory_mb": {"engine": {"rss_mb": rss_mb, "pss_mb": rss_mb - 1}},
        "observed": {"block_cache_usage": cache_mb, "memory_approx_memtable": cache_mb / 2},
    }


def test_growth_per_waiting_run_is_split_between_the_block_cache_and_the_rest() -> None:
    g = growth("256 MiB", [point(1_000, 200.0, 50.0), point(5_000, 300.0, 120.0), point(10_000, 400.0, 210.0)])
    # 200 MB more RSS over 9,000 more waiting runs: 22.76 KB each; the cache 160 MB of it, the rest 40.
    assert (g["kb_per_waiting_run"], g["block_cache_kb"], g["rest_kb"]) == (22.76, 18.2, 4.55)
    # The last step alone: 100 MB over 5,000 runs.
    assert (g["last_step_from_waiting"], g["last_step_kb"]) == (5_000, 20.48)
    assert growth_line(g) == (
        "engine-memory: budget=256MiB kb_per_waiting_run=22.76 block_cache_kb=18.2 rest_kb=4.55 "
        "(from 1000 to 10000 waiting) last_step_kb=20.48 (from 5000)"
    )
    assert point_line("64 MiB", point(1_000, 200.0, 50.0)) == (
        "engine-memory: budget=64MiB waiting=1000 rss_mb=200 pss_mb=199 block_cache_mb=50 memtables_mb=25 rest_mb=150"
    )


@pytest.mark.parametrize("sizes", [[10_000, 10_000], [10_000]])
def test_no_growth_is_made_up_from_one_size(sizes: list[int]) -> None:
    points = [point(n, 300.0, 100.0) for n in sizes]
    assert growth("256 MiB", points)["kb_per_waiting_run"] == 0.0
