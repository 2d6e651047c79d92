"""The local stack: install the pinned Restate binaries, start and stop the processes."""
