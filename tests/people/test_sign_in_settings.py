"""What an operator configures for sign-in is checked before the console starts: each mistake
gets its reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from replenisher.identity.passwords import WeakPassword, hash_password, verify_password
from replenisher.identity.settings import OidcSettings, SignInSettings

SECRET = "s" * 32


def settings(**changes: object) -> SignInSettings:
    values: dict[str, object] = {"people_file": Path("people.toml"), "session_secret": SECRET}
    values["public_url"] = "http://127.0.0.1:8090"
    return SignInSettings.model_validate(values | changes)


def refused(**changes: object) -> str:
    with pytest.raises(ValidationError) as caught:
        settings(**changes)
    return str(caught.value)


def test_the_defaults_hold_on_loopback() -> None:
    plain = settings()
    assert plain.callback_url == "http://127.0.0.1:8090/auth/callback" and not plain.secure_cookies
    assert settings(public_url="https://buy.plant.example/").public_url == "https://buy.plant.example"
    assert settings(public_url="https://buy.plant.example").secure_cookies


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"session_secret": "short"}, "at least 32 characters"),
        ({"public_url": "http://buy.plant.example"}, "plain http beyond this machine"),
        ({"public_url": "https://buy.plant.example/console"}, "a scheme and host"),
        ({"public_url": "buy.plant.example"}, "a scheme and host"),
        ({"session_hours": 0}, "greater than 0"),
        ({"oidc": {"issuer": "login.example", "client_id": "c", "client_secret": "x"}}, "http(s) URL"),
        ({"oidc": {"issuer": "https://login.example", "client_id": "", "client_secret": "x"}}, "client_id"),
    ],
)
def test_each_mistake_is_refused_with_its_reason(changes: dict[str, object], says: str) -> None:
    assert says in refused(**changes)


def test_the_secrets_do_not_show_in_the_settings_printed() -> None:
    oidc = OidcSettings(issuer="https://login.example/", client_id="c", client_secret="the-client-secret")
    shown = repr(settings(oidc=oidc))
    assert SECRET not in shown and "the-client-secret" not in shown
    assert oidc.issuer == "https://login.example"


def test_a_password_is_kept_as_an_argon2_hash_and_short_ones_are_refused() -> None:
    stored = hash_password("a long enough passphrase")
    assert stored.startswith("$argon2id$") and "passphrase" not in stored
    assert verify_password(stored, "a long enough passphrase")
    assert not verify_password(stored, "a long enough passphrasE")
    assert not verify_password("not a hash", "anything")
    with pytest.raises(WeakPassword, match="at least 12 characters"):
        hash_password("short")


# --- the console's own start ------------------------------------------------------------------------


def console(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REPLENISHER_PEOPLE", "REPLENISHER_CONSOLE"))}
    return subprocess.run(
        [sys.executable, "-m", "replenisher.cli", "console", "--port", "1", *args],
        env={**clean, **env}, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_without_sign_in_the_console_refuses_to_serve_beyond_loopback() -> None:
    refused = console("--host", "0.0.0.0")
    assert refused.returncode == 2 and "serves loopback only, not 0.0.0.0" in refused.stderr, refused
    assert "REPLENISHER_PEOPLE_FILE" in refused.stderr


def test_sign_in_without_its_secret_or_with_a_broken_matrix_stops_the_console(tmp_path: Path) -> None:
    people = tmp_path / "people.toml"
    people.write_text('[[people]]\nid = "ana"\nname = "Ana"\nemail = "ana@plant.example"\nroles = ["approver"]\n'
                      'limit = "lots"\n')  # fmt: skip
    missing = console("--host", "0.0.0.0", REPLENISHER_PEOPLE_FILE=str(people))
    assert missing.returncode == 2
    # Without a secret the console makes its own (sessions end with it); where people reach it, only
    # the operator can say, beyond loopback.
    assert "sign-in sessions last until this console stops" in missing.stdout
    assert "REPLENISHER_CONSOLE_PUBLIC_URL: is required when REPLENISHER_PEOPLE_FILE is set" in missing.stderr
    broken = console(
        "--host", "0.0.0.0", REPLENISHER_PEOPLE_FILE=str(people), REPLENISHER_CONSOLE_SESSION_SECRET=SECRET,
        REPLENISHER_CONSOLE_PUBLIC_URL="https://buy.plant.example",
    )  # fmt: skip
    assert broken.returncode == 2
    assert f"REPLENISHER_PEOPLE_FILE: {people}: person 'ana': limit: must be a number, got 'lots'" in broken.stderr
    assert "Traceback" not in missing.stderr + broken.stderr


def test_the_console_settings_name_each_missing_variable() -> None:
    from replenisher.console.settings import ConsoleSettingsError, sign_in_from

    assert sign_in_from({}) is None, "no people file: no sign-in"
    with pytest.raises(ConsoleSettingsError) as caught:
        sign_in_from({"REPLENISHER_PEOPLE_FILE": "people.toml", "REPLENISHER_OIDC_ISSUER": "login.example"})
    said = str(caught.value)
    assert "REPLENISHER_OIDC_ISSUER: the issuer must be an http(s) URL" in said
    with pytest.raises(ConsoleSettingsError) as caught:
        sign_in_from({"REPLENISHER_PEOPLE_FILE": "people.toml"})
    said = str(caught.value)
    assert "REPLENISHER_CONSOLE_SESSION_SECRET: is required when REPLENISHER_PEOPLE_FILE is set" in said
    assert "REPLENISHER_CONSOLE_PUBLIC_URL: is required when REPLENISHER_PEOPLE_FILE is set" in said
