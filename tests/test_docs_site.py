"""The documentation: README.md stays a short front page, and the mkdocs site under docs/ builds
with --strict (every page in the nav, every link between pages and every anchor resolving), offline.

The commands on the pages are run as written by the tests next to what they document (the world's
API, the inbound endpoint, the restate CLI, replaying runs, talking to an agent, the settings);
tests/bench_logic checks the benchmarks page's table against bench/results/results.json."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support import DOCS_DIR, REPO_ROOT, doc_section, sh_blocks

README = REPO_ROOT / "README.md"
MAX_README_LINES = 250
# The two commands a fresh clone starts with, exactly as the README has always stated them.
SET_UP = (
    "make demo    # sets everything up, then runs 20 SKUs for three compressed weeks",
    "make test    # the whole test suite, against real restate-server, granian and hypercorn processes",
)


def test_the_readme_is_a_short_front_page_that_states_both_commands() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move the detail into docs/"
    commands = [line for block in sh_blocks(text) for line in block.splitlines()]
    for command in SET_UP:
        assert command in commands, f"README.md no longer states `{command.split('#')[0].strip()}`"


def test_every_link_of_the_readme_reaches_a_file() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (REPO_ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def build(config_dir: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # The theme's banner about its future is not a warning of this build; it only adds noise.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=config_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = build(REPO_ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "world-api/index.html", "security/inbound/index.html", "benchmarks/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # deploy/README.md is shown as it stands, and the screenshots the tests take are on their pages.
    assert "A three-node Restate cluster" in (tmp_path / "site" / "deploying" / "details" / "index.html").read_text()
    assert '<img alt="' in (tmp_path / "site" / "operating" / "console" / "index.html").read_text()
    assert (tmp_path / "site" / "screenshots" / "console-inbox.png").is_file()


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    # Positive control: the same site with one link to an anchor that is not there must not build.
    shutil.copytree(DOCS_DIR, tmp_path / "docs")
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path)
    (tmp_path / "deploy").mkdir()
    shutil.copy(REPO_ROOT / "deploy" / "README.md", tmp_path / "deploy")
    page = tmp_path / "docs" / "tests.md"
    page.write_text(page.read_text() + "\nSee [the settings](operating/settings.md#no-such-section).\n")
    done = build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-section" in done.stdout + done.stderr


def test_a_section_ends_at_the_next_heading_and_never_at_a_shell_comment() -> None:
    # The inbound page's block has comment lines starting with "#": they must stay inside the section.
    section = doc_section("security/inbound.md", "## Sending as a party by hand")
    [block] = sh_blocks(section)
    assert "# a supplier may not approve: 403" in block
    assert "## Secrets and settings" not in section
    assert doc_section("security/inbound.md", "## TLS").count("TLS-terminating proxy") == 1
