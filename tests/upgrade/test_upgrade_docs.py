"""The "Upgrading while runs wait" section states commands that exist, as a user runs them.

Each `make` target it names is a target of the Makefile, each `replenisher upgrade-check` line
parses with the CLI's own parser, the summary line it shows is the one the command prints, and CI
runs the check after `make test`.
"""

from __future__ import annotations

import re
import shlex

from replenisher.cli import parser
from replenisher.upgrade.replay import Result
from replenisher.upgrade.report import summary
from support import REPO_ROOT, doc_section, sh_blocks

SECTION = doc_section("deploying/upgrading.md", "## Upgrading while runs wait")
MAKEFILE = (REPO_ROOT / "Makefile").read_text()


def commands() -> list[str]:
    lines = [line.strip() for block in sh_blocks(SECTION) for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_every_make_target_of_the_section_exists() -> None:
    targets = [line.split()[1] for line in commands() if line.startswith("make ")]
    assert {"upgrade-check", "down", "up"} <= set(targets)
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", MAKEFILE, re.MULTILINE), f"no make target {target}"
    assert "make upgrade-corpus" in SECTION and re.search(r"^upgrade-corpus:", MAKEFILE, re.MULTILINE)


def test_every_upgrade_check_line_parses_with_the_cli() -> None:
    lines = [line for line in commands() if "replenisher upgrade-check" in line]
    assert len(lines) == 2
    for line in lines:
        args = parser().parse_args(shlex.split(line)[1:])
        assert args.command == "upgrade-check"
    assert parser().parse_args(shlex.split(lines[0])[1:]).from_stack


def test_the_summary_line_shown_is_the_one_printed() -> None:
    shown = next(line for line in SECTION.splitlines() if line.startswith("upgrade-check: "))
    printed = summary(Result(verdicts=[], outside_calls=[]))
    assert re.sub(r"=\w+", "=", shown) == re.sub(r"=\w+", "=", printed)


def test_ci_runs_the_corpus_check_after_make_test() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert ci.index("make test </dev/null") < ci.index("make upgrade-check </dev/null")
