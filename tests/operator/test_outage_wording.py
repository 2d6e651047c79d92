"""How an outage reads to the on-call engineer: the CLI's note and the console's banner."""

from __future__ import annotations

from replenisher.console.pages import down_banner
from replenisher.operations.restate.health import Health

PROBED = "its deployment at http://127.0.0.1:9080/ does not answer (ConnectError)"


def test_the_note_says_since_when_why_and_what_restate_holds_without_nested_brackets() -> None:
    line = Health(service_down=True, since=1_800_000_000.0, error=PROBED, waiting_invocations=2).line()
    assert line == (
        "the replenisher service is down since 2027-01-15 08:00:00 UTC — Restate answers, the service does not: "
        f"{PROBED}; Restate holds 2 invocations until it is back"
    )
    assert "((" not in line and "))" not in line


def test_one_held_invocation_is_singular_and_a_missing_reason_is_said() -> None:
    line = Health(service_down=True, found_at=1_800_000_000.0, waiting_invocations=1).line()
    assert line.endswith("the service does not: its attempts are refused; Restate holds 1 invocation until it is back")
    assert "found so at 2027-01-15 08:00:00 UTC with nothing in flight to tell since when" in line
    assert "(s)" not in line


def test_the_console_banner_reads_as_one_sentence_about_the_outage() -> None:
    banner = down_banner(Health(service_down=True, since=1_800_000_000.0, error=PROBED + "."))
    assert f"Restate answers, the service does not: {PROBED}. These pages" in banner, banner
    assert "))" not in banner and ".." not in banner
