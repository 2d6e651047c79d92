"""The operator layer's boundaries: what its use cases hand the faces, and what the faces are handed.

Over the real stack, tests/operator's CLI and console suites run every use case; these check
the seams the refactoring into `replenisher.operations` drew, without starting anything.
"""

from __future__ import annotations

import pytest

from replenisher.console.app import Console
from replenisher.console.pages import error_page
from replenisher.console.settings import ConsoleSettings
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import SkuView
from replenisher.operations.outcomes import EndedRun
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.health import Health
from replenisher.operations.restate.http import among, literal
from replenisher.operations.status import SkuStatus

ENVIRONMENT = {
    "REPLENISHER_INGRESS_URL": "http://127.0.0.1:1",
    "REPLENISHER_ADMIN_URL": "http://127.0.0.1:2",
    "REPLENISHER_WORLD_URL": "http://127.0.0.1:3",
    "REPLENISHER_CURRENCY": "EUR-and-more",
    "REPLENISHER_CONSOLE_CONFIRM_ABOVE": "250",
}


def test_the_console_takes_its_settings_from_whoever_builds_it_not_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    assert Console().settings == ConsoleSettings(), "a console built without settings has the local defaults"
    read = ConsoleSettings.from_environment(ENVIRONMENT)
    assert (read.ingress_url, read.admin_url, read.inbox_url) == tuple(ENVIRONMENT[k] for k in list(ENVIRONMENT)[:3])
    assert read.currency == "EUR-and-" and read.confirm_above == 250.0
    assert Console(read, now=lambda: 5.0).settings is read


def test_the_down_banner_is_on_a_page_only_when_the_page_is_handed_the_health() -> None:
    down = Health(service_down=True, since=1_800_000_000.0, error="refused")
    assert "id=service-down" in error_page(503, "no", service_down=down)
    assert "id=service-down" not in error_page(503, "no")


def test_a_status_is_its_four_parts_in_json_and_the_notes_only_for_people() -> None:
    status = SkuStatus(
        record=SkuView(sku="SKU-1"), run=None, approval_token=None, paused=[], token_note="(not shown: x)"
    )
    assert list(status.model_dump(mode="json")) == ["record", "run", "approval_token", "paused"]


def test_an_ended_run_is_its_outcome_with_the_decision_last() -> None:
    outcome = ReplenishmentResult(run_id="replenish-SKU-1-1", sku="SKU-1", outcome="received", started_at=1, ended_at=2)
    ended = EndedRun(**outcome.model_dump(), decision="approved up to 4.00")
    assert ended.model_dump(mode="json") == {**outcome.model_dump(mode="json"), "decision": "approved up to 4.00"}


def test_sql_literals_are_quoted_and_lists_are_made_of_them() -> None:
    assert literal("it's") == "'it''s'"
    assert among(("SkuAgent", "Replenish")) == "('SkuAgent', 'Replenish')"


async def test_the_client_reads_time_from_the_clock_it_is_given() -> None:
    async with RestateClient("http://127.0.0.1:1/", "http://127.0.0.1:2", now=lambda: 42.0) as client:
        assert client.now() == 42.0
        assert (client.ingress_url, client.admin_url) == ("http://127.0.0.1:1", "http://127.0.0.1:2")
        assert client.degraded is None
        client.degraded = Health(service_down=True)
        assert client.degraded is not None and client.degraded.service_down
