"""Engines of the loop other than Restate's (`replenisher.durable.engine`): in memory, for the suites and scripts."""
