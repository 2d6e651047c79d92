"""Where a probe bench (`bench.state_scan`, `bench.list_shards`) writes its runs: one JSON file, its
settings with the day, the machine and its load at the end beside the rows."""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def write_runs(out: Path, settings: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    meta = {
        **settings,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    print(f"written {out}", file=sys.stderr)
