"""The service's settings (pydantic-settings): every variable the docs name sets its field, an empty
one counts as unset, and a bad value stops the service at start naming the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replenisher.config import MAX_SERVICE_WORKERS, Settings, load_settings, service_workers, variable
from replenisher.domain.credentials import new_token_key

DOCS = Path(__file__).resolve().parent.parent / "docs"
# The stack's (the launcher's) own settings, not the service's.
NOT_THE_SERVICES = {"REPLENISHER_SERVER"}


def documented_variables() -> set[str]:
    """The variables in the first column of the settings tables (docs/operating/settings.md, docs/agent/claude.md)."""
    found: set[str] = set()
    for page in ("operating/settings.md", "agent/claude.md"):
        for line in (DOCS / page).read_text().splitlines():
            if line.startswith("| `"):
                first = line.split("|")[1]
                found |= set(re.findall(r"`((?:REPLENISHER|ANTHROPIC)_[A-Z_]+)`", first))
    return found - NOT_THE_SERVICES


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in documented_variables():
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_every_documented_variable_names_a_field() -> None:
    documented = documented_variables()
    assert len(documented) >= 25
    fields = {variable(name) for name in Settings.model_fields}
    assert documented <= fields, f"documented but read by no field: {sorted(documented - fields)}"


@pytest.mark.parametrize(
    ("name", "value", "field", "expected"),
    [
        ("REPLENISHER_DAY_SECONDS", "2.5", "day_seconds", 2.5),
        ("REPLENISHER_APPROVAL_REMINDERS", "0.25, 0.75", "approval_reminders", (0.25, 0.75)),
        ("REPLENISHER_APPROVAL_REMINDERS", "none", "approval_reminders", ()),
        ("REPLENISHER_BACKUP_APPROVER", "none", "backup_approver", None),
        ("REPLENISHER_CLAUDE_READ_REPLIES", "false", "claude_read_replies", False),
        ("REPLENISHER_CLOCK_CALENDAR_ORIGIN", "2026-01-05T00:00", "clock_calendar_origin", 1_767_571_200.0),
        ("REPLENISHER_DECIDER", "claude", "decider", "claude"),
        ("REPLENISHER_SERVICE_WORKERS", "2", "service_workers", 2),
    ],
)
def test_a_variable_sets_its_field(
    clean_env: pytest.MonkeyPatch, name: str, value: str, field: str, expected: object
) -> None:
    assert getattr(load_settings(), field) != expected, "the default differs, so the variable is what set it"
    clean_env.setenv(name, value)
    assert getattr(load_settings(), field) == expected


def test_the_key_is_read_from_anthropic_api_key_and_kept_secret(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    s = load_settings()
    assert s.anthropic_api_key is not None and s.anthropic_api_key.get_secret_value() == "sk-ant-test"
    assert "sk-ant-test" not in repr(s)


def test_an_empty_variable_counts_as_unset_and_an_argument_wins(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("REPLENISHER_DAY_SECONDS", "")
    assert load_settings().day_seconds == 86_400.0
    clean_env.setenv("REPLENISHER_DAY_SECONDS", "3")
    assert load_settings(day_seconds=7.0).day_seconds == 7.0


def test_loaded_fields_are_not_variables_of_their_own(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("REPLENISHER_CALENDAR", '{"timezone": "Europe/Berlin"}')
    clean_env.setenv("REPLENISHER_DOOR_KEY", "00" * 32)
    s = load_settings()
    assert s.calendar.timezone == "UTC" and s.door_key is None


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("REPLENISHER_DAY_SECONDS", "fast", "valid number"),
        ("REPLENISHER_DAY_SECONDS", "0", "greater than 0"),
        ("REPLENISHER_DECIDER", "gpt", "'offline' or 'claude'"),
        ("REPLENISHER_IDENTITY_KEYS", "nonsense", "not a Restate public key"),
        ("REPLENISHER_CLAUDE_MAX_TOKENS", "5", "greater than or equal to 64"),
        ("REPLENISHER_CALENDAR_FILE", "/no/such/calendar", "No such file"),
        ("REPLENISHER_DOOR_KEY_FILE", "/no/such/key", "REPLENISHER_DOOR_KEY_FILE"),
        ("REPLENISHER_PEOPLE_FILE", "/no/such/people.toml", "cannot read the authority matrix"),
        ("REPLENISHER_SERVICE_WORKERS", "0", "greater than or equal to 1"),
        ("REPLENISHER_SERVICE_WORKERS", str(MAX_SERVICE_WORKERS + 1), f"less than or equal to {MAX_SERVICE_WORKERS}"),
    ],
)
def test_a_bad_value_stops_the_start_naming_the_variable(
    clean_env: pytest.MonkeyPatch, name: str, value: str, reason: str
) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    message = str(stopped.value)
    assert message.startswith(f"invalid replenisher settings: {name}: "), message
    assert reason in message


def test_a_compressed_clock_without_an_origin_starts_when_the_settings_were_read(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("REPLENISHER_DAY_SECONDS", "1")
    first = load_settings()
    assert first.clock.origin.wall == first.started_at
    later = load_settings(started_at=first.started_at + 10)
    assert later.clock.origin.wall == first.started_at + 10, "each bootstrap has its own start, no process global"


def test_a_people_file_is_loaded_into_the_parts_re_read_on_change_and_a_bad_one_stops_the_start(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The matrix is opt-in: without the variable there is none; with it, bootstrap hands it to the
    parts; a file with a limit that is not a number stops the start with the file's own words."""
    from replenisher.wiring import bootstrap

    assert load_settings().people is None and bootstrap(load_settings()).authority is None
    good = tmp_path / "people.toml"
    good.write_text(
        '[[people]]\nid = "ana"\nname = "Ana"\nemail = "ana@example.com"\nroles = ["approver"]\nlimit = 1000\n'
    )
    clean_env.setenv("REPLENISHER_PEOPLE_FILE", str(good))
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    assert "REPLENISHER_PEOPLE_FILE needs REPLENISHER_PERSONAL_TOKEN_KEY_FILE" in str(stopped.value)
    key = tmp_path / "token.key"
    key.write_text("not a key\n")
    clean_env.setenv("REPLENISHER_PERSONAL_TOKEN_KEY_FILE", str(key))
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    assert str(stopped.value) == (
        f"invalid replenisher settings: REPLENISHER_PERSONAL_TOKEN_KEY_FILE: {key}: "
        "a personal token key is 64 hex characters"
    )
    key.write_text(new_token_key() + "\n")
    parts = bootstrap(load_settings())
    assert parts.authority is not None and parts.authority.current().person("ana").limit == 1000
    # An edit counts from the next read, with no restart (a delegation for someone's leave, a new limit).
    good.write_text(good.read_text().replace("limit = 1000", "limit = 2500"))
    assert parts.authority.current().person("ana").limit == 2500
    bad = tmp_path / "bad.toml"
    bad.write_text(good.read_text().replace("limit = 2500", 'limit = "lots"'))
    clean_env.setenv("REPLENISHER_PEOPLE_FILE", str(bad))
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    assert str(stopped.value) == (
        f"invalid replenisher settings: REPLENISHER_PEOPLE_FILE: {bad}: "
        "person 'ana': limit: must be a number, got 'lots'"
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0", "greater than or equal to 1"),
        ("-3", "greater than or equal to 1"),
        (str(MAX_SERVICE_WORKERS + 1), f"less than or equal to {MAX_SERVICE_WORKERS}"),
        ("two", "valid integer"),
        ("1.5", "valid integer"),
    ],
)
def test_the_launchers_read_of_the_service_workers_refuses_what_the_service_would_naming_the_range(
    value: str, reason: str
) -> None:
    """`make up`, the test fixtures and the benches read REPLENISHER_SERVICE_WORKERS before any worker
    starts (`service_workers`): a bad value is refused there with the variable, the value and the range."""
    with pytest.raises(ValueError, match="REPLENISHER_SERVICE_WORKERS") as refused:
        service_workers({"REPLENISHER_SERVICE_WORKERS": value})
    message = str(refused.value)
    assert repr(value) in message and reason in message and f"from 1 to {MAX_SERVICE_WORKERS}" in message, message


def test_the_service_workers_default_to_one_and_an_empty_variable_counts_as_unset() -> None:
    assert service_workers({}) == 1
    assert service_workers({"REPLENISHER_SERVICE_WORKERS": " "}) == 1
    assert service_workers({"REPLENISHER_SERVICE_WORKERS": "3"}) == 3
