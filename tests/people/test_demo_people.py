"""The people files in the repository do what the docs and the demo say: the example matrix is the
docs' own, the demo's accounts sign in with the passwords the demo prints, and `replenisher
console --people FILE` serves a console people sign in to, as a real process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

from replenisher.demo_report import inspection_help
from replenisher.domain.authority import load_authority
from replenisher.identity.passwords import verify_password
from replenisher.stack.ports import free_port
from replenisher.stack.processes import ManagedProcess, http_answers
from support import REPO_ROOT, doc_section

EXAMPLE = REPO_ROOT / "deploy" / "people.example.toml"
DEMO = REPO_ROOT / "deploy" / "people.demo.toml"


def test_the_example_file_is_the_docs_example_and_checks_as_the_docs_show() -> None:
    [shown] = re.findall(r"```toml\n(.*?)```", doc_section("operating/people.md", "## The matrix file"), re.S)
    assert EXAMPLE.read_text() == shown
    checked = subprocess.run(
        [sys.executable, "-m", "replenisher.cli", "people", "check", str(EXAMPLE)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    section = doc_section("operating/people.md", "## Checking a change before it goes live")
    [printed] = re.findall(r"```text\n(.*?)```", section, re.S)
    assert checked.stdout == printed


def test_the_demo_accounts_sign_in_with_the_passwords_the_demo_prints() -> None:
    help_text = inspection_help("http://i", "http://a", "http://w", "restate", None)
    said = re.search(r"--people (\S+)\s+# the same with sign-in: (\w+) / (\S+) approves", help_text)
    assert said, help_text
    path, who, password = said.groups()
    assert REPO_ROOT / path == DEMO
    matrix = load_authority(DEMO)
    person = matrix.person(who)
    assert person.may("approve") and person.password_hash and verify_password(person.password_hash, password)
    # Each account with a password names it in a comment beside its hash, and that is the one.
    for p in matrix.people:
        if p.password_hash:
            comment = re.search(rf'{re.escape(p.password_hash)}"\s+# (\S+)', DEMO.read_text())
            assert comment and verify_password(p.password_hash, comment.group(1)), p.id


def test_the_console_with_the_demo_people_signs_paul_in(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "replenisher.cli", "console", "--people", str(DEMO), "--port", str(port)]
    console = ManagedProcess("console", argv, cwd=REPO_ROOT, log_path=tmp_path / "console.log")
    url = f"http://127.0.0.1:{port}"
    console.is_ready = lambda: console.running and http_answers(f"{url}/sign-in")  # type: ignore[method-assign]
    console.start()
    try:
        console.wait_ready()
        with httpx.Client(base_url=url, timeout=30) as browser:
            assert browser.get("/inbox").status_code == 303
            page = browser.get("/sign-in")
            csrf = re.search(r"name=csrf value='([^']+)'", page.text)
            assert csrf
            form = {"csrf": csrf.group(1), "person": "paul", "password": "paul-demo-passphrase", "next": "/inbox"}
            assert browser.post("/sign-in", data=form).status_code == 303
            inbox = browser.get("/inbox")  # no Restate here: an error page, but Paul's
            assert "Paul Meyer (plant manager)" in inbox.text and "Sign out" in inbox.text
    finally:
        console.stop()
    assert "sign-in sessions last until this console stops" in console.log_tail()
