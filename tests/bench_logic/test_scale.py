"""`make bench-scale` (bench/scale.py): its smallest plan end to end on a real stack, and how it reads
lateness from Restate's rows. No figure is judged: a bench measures, a test checks that it does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bench.scale import FULL, QUICK, SMOKE, completed_between, due_between, lateness

from support import REPO_ROOT

SCALE_LINE = re.compile(
    r"^scale: skus=(\d+) ticks=(\d+) late_p99_s=([0-9.]+) cpu_ms_per_tick=(-?[0-9.]+) engine_mb=([0-9.]+) "
    r"skus_page_ms=([0-9.]+)$"
)


def at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.mark.slow
def test_the_smoke_plan_runs_end_to_end_and_ends_with_a_well_formed_scale_line(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--plan", "smoke", "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    match = SCALE_LINE.match(last)
    assert match, f"not a scale line: {last!r}"
    assert int(match.group(1)) == SMOKE.sizes[0]
    assert int(match.group(2)) > 0, "the SKUs ticked in the window"
    run = json.loads(out.read_text())["runs"][0]
    assert run["skus"] == SMOKE.sizes[0]
    assert run["lateness"]["due"] > 0, "Restate's records held ticks due in the window"
    assert run["lists"]["console_skus"]["bytes"] > 0 and run["lists"]["cli_skus"]["bytes"] > 0
    # The pages came from the SKU list: every agent the bench watched put its entry there, and the list is filled.
    listed = run["lists"]["list_breakdown"]
    assert (listed["total"], listed["filled"]) == (SMOKE.sizes[0], True), listed
    parts = ("health_ms", "paused_scan_ms", "paused_by_id_and_retrying_ms", "whole_page_ms", "whole_page_scanning_ms")
    assert all(listed[part] > 0 for part in parts), listed
    assert set(run["cpu_ms_per_tick"]) == {"engine", "service", "world"}
    assert run["memory_mb"]["engine"]["pss_mb"] > 0


def test_a_tick_not_started_counts_late_by_its_wait_so_far_and_an_early_start_is_on_time() -> None:
    t = 1_800_000_000.0
    rows = [
        {"scheduled_start_at": at(t), "running_at": at(t + 0.2), "completed_at": at(t + 0.3)},
        {"scheduled_start_at": at(t + 1), "running_at": at(t + 0.999), "completed_at": at(t + 1.1)},
        {"scheduled_start_at": at(t + 2)},
    ]
    late = lateness(rows, read_at=t + 7)
    assert late["due"] == 3 and late["not_started"] == 1
    assert late["late_max_s"] == 5.0, "the waiting tick, 5 s past due when read"
    assert late["late_p50_s"] == 0.2
    assert late["over_1s"] == 1


def test_only_ticks_due_in_the_window_are_judged_and_a_first_tick_has_no_due_time() -> None:
    t = 1_800_000_000.0
    first = {"running_at": at(t), "completed_at": at(t + 0.1)}
    before = {"scheduled_start_at": at(t - 5), "running_at": at(t - 5), "completed_at": at(t - 4.9)}
    inside = {"scheduled_start_at": at(t + 5), "running_at": at(t + 5), "completed_at": at(t + 5.1)}
    rows = [first, before, inside]
    assert due_between(rows, t, t + 10) == [inside]
    assert completed_between(rows, t, t + 10) == 2


def test_the_plans_quick_fits_its_ten_minutes_and_full_reaches_100000() -> None:
    assert QUICK.sizes == [1000]
    # Ticking (half a day to settle, then the days measured) leaves the rest of ten minutes for set-up.
    assert (QUICK.days + 0.5) * QUICK.day_of(1000) <= 300
    assert FULL.sizes == [1000, 10_000, 100_000]
    assert all(size / FULL.day_of(size) <= 200 for size in FULL.sizes), "a plan of size, not of saturation"
