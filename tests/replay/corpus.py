"""The corpus of real runs (recorded by scripts/record_runs.py through the real stack) and replaying it."""

from __future__ import annotations

import json
from pathlib import Path

from replenisher.domain.archive import RunArchive
from replenisher.replay.core import read_archive

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "runs"


def corpus() -> list[RunArchive]:
    return [read_archive(json.loads(path.read_text())) for path in sorted(CORPUS.glob("*.json"))]
