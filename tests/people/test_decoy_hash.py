"""The decoy password hash (checked for an unknown person, so a wrong id costs what a wrong password
does) is made by a console that signs people in, when it starts, and by nothing else: every CLI
command paid about 0.4 s of CPU for it while it was made at import."""

from __future__ import annotations

import subprocess
import sys

COUNT_HASHES = """
import argon2
made = []
real = argon2.PasswordHasher.hash
argon2.PasswordHasher.hash = lambda self, *a, **k: made.append(1) or real(self, *a, **k)
{body}
print(len(made))
"""


def hashes_made(body: str) -> int:
    script = COUNT_HASHES.format(body=body)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    return int(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_and_its_commands_hashes_nothing() -> None:
    body = "import replenisher.cli, replenisher.people_command, replenisher.identity.web\nreplenisher.cli.parser()"
    assert hashes_made(body) == 0


def test_a_sign_in_makes_the_decoy_when_it_is_built_and_once() -> None:
    body = """
from pathlib import Path
from replenisher.identity.settings import SignInSettings
from replenisher.identity.web import SignIn
settings = SignInSettings(people_file=Path("people.toml"), session_secret="s" * 32, public_url="http://127.0.0.1:8090")
assert not made, "imported, nothing built: no hash yet"
SignIn(settings, lambda: None, lambda *a, **k: "")
SignIn(settings, lambda: None, lambda *a, **k: "")
"""
    assert hashes_made(body) == 1
