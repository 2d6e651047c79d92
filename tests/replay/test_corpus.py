"""Replaying the corpus of real runs: the offline policy agrees with itself on every turn, a
divergence is reported with its turn, both choices and both reasons, and the docs' commands work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.replay.corpus import CORPUS, corpus

from replenisher.cli import main
from replenisher.domain.policy import OfflinePolicy
from replenisher.replay.core import replay


def test_the_corpus_holds_at_least_20_real_runs_with_faults_and_rejections() -> None:
    runs = corpus()
    assert len(runs) >= 20
    outcomes = {run.outcome for run in runs}
    assert "rejected" in outcomes and len(outcomes) >= 3, outcomes
    last = [run.decisions[-1].decision for run in runs]
    assert all(decision is not None and decision.tool == "done" for decision in last)


async def test_every_recorded_turn_of_every_run_agrees_with_the_offline_policy() -> None:
    for archive in corpus():
        report = await replay(archive, OfflinePolicy())
        assert report.first_divergence is None, (archive.run_id, report.first_divergence)
        turns = len(archive.decisions)
        assert (report.turns, report.agree, report.stopped) == (turns, turns, "end of record"), report.stop_detail
        assert report.replayed_outcome == archive.outcome


def test_replay_of_an_archive_file_and_of_the_corpus_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    one = sorted(CORPUS.glob("*.json"))[0]
    assert main(["replay", str(one), "--decider", "offline"]) == 0
    assert f"{one.stem}: offline agrees with the record on all" in capsys.readouterr().out
    assert main(["replay", str(CORPUS), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["runs"] == len(corpus()) and summary["diverged"] == 0 and summary["usd"] == 0


def test_an_archive_this_code_cannot_read_is_refused_plainly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = json.loads(sorted(CORPUS.glob("*.json"))[0].read_text()) | {"schema_version": 99}
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(newer))
    assert main(["replay", str(path)]) == 2
    assert "schema_version 99" in capsys.readouterr().err
    assert main(["replay", str(CORPUS), "--since", "soon"]) == 2
    assert "--since takes" in capsys.readouterr().err


# Every recorded turn through the real anthropic client and the stand-in API: 54 s in CI, past the
# suite's 180 s with the machine loaded by a second CI run here.
@pytest.mark.timeout(360)
@pytest.mark.slow
async def test_the_corpus_replays_against_the_claude_decider_over_the_stand_in_api() -> None:
    from tests.decider.mock_api import MockApi

    from replenisher.deciders.claude import ClaudeDecider

    api = MockApi()
    decider = ClaudeDecider(api.client(), "claude-sonnet-4-6")
    runs = corpus()
    reports = [await replay(archive, decider, keep_going=True) for archive in runs]
    for archive, report in zip(runs, reports, strict=True):
        # Past a divergence the loop follows the model's choice only while the record still answers it.
        assert report.turns == len(archive.decisions) or report.first_divergence is not None, report
    decisions = [r for r in api.requests if r.get("tools")]
    assert len(decisions) >= sum(r.turns for r in reports)
    assert all(r.usd > 0 and r.input_tokens > 0 and r.model == "claude-sonnet-4-6" for r in reports)
    assert sum(r.agree for r in reports) + sum(r.diverged for r in reports) == sum(r.turns for r in reports)


def test_the_report_of_a_run_still_going_says_so_rather_than_none() -> None:
    from replenisher.replay.playback import ReplayReport
    from replenisher.replay_command import report_lines

    going = ReplayReport(run_id="replenish-SKU-1-1", sku="SKU-1", decider="offline", turns=3, agree=3)
    assert report_lines(going)[0].endswith("(recorded outcome: none yet, the run is still going)")
    ended = going.model_copy(update={"recorded_outcome": "received"})
    assert report_lines(ended)[0].endswith("(recorded outcome: received)")
