"""A real run's archive, and its replay judged from the world's call log: the replay calls nothing.

Positive control: the run itself shows up in the same log (calls about its SKU and supplier),
so a replay that did call the world would be seen there.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from anthropic_stand_in import STAND_IN_APP
from e2e.scenario import Scenario
from replenisher.domain.archive import ARCHIVE_SCHEMA_VERSION, MAX_ARCHIVE_BYTES, RunArchive
from replenisher.stack.admin import Admin
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from support import HAPPY_PATH, REPO_ROOT, eventually

pytestmark = pytest.mark.e2e


async def world_calls(scenario: Scenario) -> list[dict[str, Any]]:
    by_sku = (await scenario.world.get("/admin/calls", params={"sku": scenario.sku})).json()["calls"]
    return by_sku + await scenario.calls()


async def replay_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "replenisher.cli",
        "replay",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        if process.returncode is None:  # timed out (or the test was cancelled): do not leave it running
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_real_run_is_archived_and_its_replay_calls_nothing_in_the_world(
    scenario: Scenario, admin: Admin, log_dir: Path
) -> None:
    await scenario.setup(on_hand=5, safety_stock=20, target_stock=100, price=4.0)
    before_run = await world_calls(scenario)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    # While it waits for the manager, its archive is its own state, up to this wait: replayable.
    async def replayed_while_waiting() -> dict[str, Any] | None:
        code, out, _ = await replay_cli(run_id, "--admin-url", admin.url, "--json")
        report = json.loads(out)["runs"][0] if code == 0 else None
        return report if report and report["turns"] == HAPPY_PATH.index("wait_for_approval") + 1 else None

    waiting = await eventually(replayed_while_waiting, timeout=30, what="a replay of the run while it waits")
    assert waiting["agree"] == waiting["turns"] and waiting["recorded_outcome"] is None
    rows = await admin.asql(f"SELECT service_name FROM state WHERE key = 'archive' AND service_key = '{run_id}'")
    assert [r["service_name"] for r in rows] == ["Replenish"]  # not handed over yet

    await scenario.decide(request["po_number"], approved=True, up_to=4.0)
    assert (await scenario.outcome(run_id))["outcome"] == "received"

    async def archived() -> RunArchive | None:
        query = f"SELECT value_utf8 FROM state WHERE service_name = 'RunArchive' AND service_key = '{run_id}'"
        rows = await admin.asql(query)
        archive = RunArchive.model_validate_json(rows[0]["value_utf8"]) if rows else None
        return archive if archive is not None and archive.outcome is not None else None

    archive = await eventually(archived, timeout=30, what=f"{run_id}'s archive to be complete")
    assert archive.schema_version == ARCHIVE_SCHEMA_VERSION and archive.outcome == "received"
    decisions = archive.decisions
    assert [e.decision.tool for e in decisions if e.decision] == HAPPY_PATH
    assert decisions[0].allowed == ["get_quotes"]
    quotes = next(e for e in archive.entries if e.op == "step")
    assert quotes.name == "get_quotes 0" and quotes.value is not None and quotes.value["offers"]
    approval = next(e for e in archive.entries if e.op == "receive" and e.value is not None)
    assert approval.name == "approval-0" and '"arrived_at"' in approval.value
    raw = archive.model_dump_json()
    assert len(raw) <= MAX_ARCHIVE_BYTES and request["token"] not in raw

    # Positive control: the run's own calls are in the world's log.
    after_run = await world_calls(scenario)
    assert len(after_run) > len(before_run)
    assert {"quote", "place_order"} <= {c["op"] for c in after_run}

    page = log_dir / f"{run_id}-replay.html"
    code, out, err = await replay_cli(run_id, "--admin-url", admin.url, "--json", "--html", str(page))
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert (summary["runs"], summary["turns"], summary["diverged"]) == (1, len(HAPPY_PATH), 0)
    assert await world_calls(scenario) == after_run
    # The page draws this run's turns from its archive, every one agreed, none marked as parting.
    html = page.read_text()
    assert f"data-run='{run_id}'" in html and "data-parts-at=''" in html and "data-parts-here" not in html
    assert html.count("(same)") == len(HAPPY_PATH) and "offline agrees with the record on all" in html

    # Every archived run Restate keeps, as the docs have it; this run among them.
    code, out, err = await replay_cli("--all", "--since", "7d", "--admin-url", admin.url, "--json")
    assert code == 0, err
    assert run_id in [r["run_id"] for r in json.loads(out)["runs"]]

    # Claude over the stand-in Messages API: the model is asked, the world still is not.
    api = HypercornApp(
        STAND_IN_APP,
        free_port(),
        {"PYTHONPATH": str(REPO_ROOT)},
        name="fake-anthropic-replay",
        log_path=log_dir / "fake-anthropic-replay.log",
    )
    api.start()
    try:
        await asyncio.to_thread(api.wait_ready)
        claude = {"ANTHROPIC_API_KEY": "sk-ant-replay", "REPLENISHER_ANTHROPIC_BASE_URL": api.url}
        args = (run_id, "--decider", "claude", "--model", "claude-sonnet-4-6", "--admin-url", admin.url, "--json")
        code, out, err = await replay_cli(*args, env=claude)
    finally:
        api.stop()
    assert code in (0, 1), err  # 1: the model parted from the offline policy somewhere, which it may
    report = json.loads(out)["runs"][0]
    assert report["decider"] == "claude" and report["model"] == "claude-sonnet-4-6"
    assert report["turns"] >= 1 and report["usd"] > 0 and report["input_tokens"] > 0
    assert report["rules_took"] == 0  # the model answered every turn
    assert await world_calls(scenario) == after_run
