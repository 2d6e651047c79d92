"""Replaying the corpus of real runs: the offline policy agrees with itself on every turn, a
divergence is reported with its turn, both choices and both reasons, and the README's commands work."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.replay.corpus import CORPUS, corpus

from replenisher.cli import main
from replenisher.domain.archive import RunArchive
from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.policy import OfflinePolicy, choose
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS_BY_NAME, Tool
from replenisher.domain.tools.base import NoArgs
from replenisher.replay.core import replay


def test_the_corpus_holds_at_least_20_real_runs_with_faults_and_rejections() -> None:
    runs = corpus()
    assert len(runs) >= 20
    outcomes = {run.outcome for run in runs}
    assert "rejected" in outcomes and len(outcomes) >= 3, outcomes
    assert all(run.turns and run.turns[-1].decision.tool == "done" for run in runs)


async def test_every_recorded_turn_of_every_run_agrees_with_the_offline_policy() -> None:
    for archive in corpus():
        report = await replay(archive, OfflinePolicy())
        assert report.first_divergence is None, (archive.run_id, report.first_divergence)
        assert (report.turns, report.agree, report.stopped) == (len(archive.turns), len(archive.turns), "end of record")


class Contrarian:
    """The offline policy, except at one turn where it takes another allowed tool that needs no arguments."""

    name = "contrarian"

    def __init__(self, turn: int, tool: str) -> None:
        self.turn, self.tool = turn, tool

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision:
        if len(state.history) == self.turn:
            return Decision(tool=self.tool, reason="the contrarian's reason", decider=self.name)
        return choose(state, [t.name for t in allowed])


def a_turn_with_another_choice() -> tuple[RunArchive, int, str]:
    for archive in corpus():
        for record in archive.turns:
            others = [
                name
                for name in record.allowed
                if name != record.decision.tool and TOOLS_BY_NAME[name].Args is NoArgs and name != "done"
            ]
            if others and record.turn > 0:
                return archive, record.turn, others[0]
    raise AssertionError("no recorded turn offered a second tool")


async def test_the_first_divergence_names_the_turn_both_choices_and_both_reasons() -> None:
    archive, turn, other = a_turn_with_another_choice()
    recorded = archive.turns[turn].decision
    report = await replay(archive, Contrarian(turn, other))
    first = report.first_divergence
    assert first is not None and first.turn == turn and report.stopped == "diverged"
    assert (first.recorded.tool, first.recorded.reason) == (recorded.tool, recorded.reason)
    assert (first.replayed.tool, first.replayed.reason) == (other, "the contrarian's reason")
    assert (report.agree, report.turns) == (turn, turn + 1)

    went_on = await replay(archive, Contrarian(turn, other), keep_going=True)
    assert (went_on.turns, went_on.diverged, went_on.agree) == (len(archive.turns), 1, len(archive.turns) - 1)


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


async def test_the_corpus_replays_against_the_claude_decider_over_the_stand_in_api() -> None:
    from tests.decider.mock_api import MockApi

    from replenisher.deciders.claude import ClaudeDecider

    api = MockApi()
    decider = ClaudeDecider(api.client(), "claude-sonnet-4-6")
    runs = corpus()
    reports = [await replay(archive, decider, keep_going=True) for archive in runs]
    assert [r.turns for r in reports] == [len(a.turns) for a in runs]
    decisions = [r for r in api.requests if r.get("tools")]
    assert len(decisions) >= sum(r.turns for r in reports)
    assert all(r.usd > 0 and r.input_tokens > 0 and r.model == "claude-sonnet-4-6" for r in reports)
    assert sum(r.agree for r in reports) + sum(r.diverged for r in reports) == sum(len(a.turns) for a in runs)
