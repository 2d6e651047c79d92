"""Replay a run's archive against a decider: the workflow's own loop on the replay engine.

The loop (`replenisher.loop.replenish`) runs as it ran on Restate: the state is rebuilt
through the tools' own `apply` from recorded results, the rules offer the same tools, and
the decider under test is asked through the same `decide_turn`. Nothing here holds a client
for the world: the only outside call a replay can make is the decider's own (the model).
"""

from __future__ import annotations

from typing import Any

from replenisher.domain.archive import ARCHIVE_SCHEMA_VERSION, RunArchive
from replenisher.domain.decisions import Decider
from replenisher.loop import RunRequest, replenish
from replenisher.replay.playback import (
    Choice,
    Diverged,
    Divergence,
    RecordEnds,
    ReplayEngine,
    ReplayReport,
)

__all__ = ["ArchiveUnreadable", "Choice", "Divergence", "ReplayReport", "read_archive", "replay"]


class ArchiveUnreadable(ValueError):
    """An archive this code cannot replay (another schema version, or damaged)."""


def read_archive(raw: dict[str, Any]) -> RunArchive:
    version = raw.get("schema_version")
    if version != ARCHIVE_SCHEMA_VERSION:
        raise ArchiveUnreadable(f"archive schema_version {version!r}; this code reads {ARCHIVE_SCHEMA_VERSION}")
    return RunArchive.model_validate(raw)


async def replay(archive: RunArchive, decider: Decider, *, keep_going: bool = False) -> ReplayReport:
    engine = ReplayEngine(archive, decider, keep_going=keep_going)
    try:
        await replenish(engine, RunRequest.model_validate(archive.request))
    except Diverged:
        engine.report.stopped = "diverged"
    except RecordEnds as e:
        # The end of a record that was cut, or of one still running, is its end; anything else
        # means the loop went where the recorded run did not.
        if engine.at < len(engine.entries) or archive.outcome is not None:
            engine.report.stopped = "record no longer applies"
            engine.report.stop_detail = str(e)
    return engine.report
