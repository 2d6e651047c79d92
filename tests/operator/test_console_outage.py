"""The console's memory of an outage (the rule; the browser test drives it over the real stack)."""

from __future__ import annotations

from typing import Any, cast

from replenisher.console.app import Console
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.health import Health


class Answers:
    """Stands in for Restate's records of successful invocations since a time."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.answered = False

    async def answered_since(self, at: float) -> bool:
        self.asked.append(at)
        return self.answered


async def test_an_outage_seen_stays_shown_from_when_it_was_seen_until_the_service_answers() -> None:
    console, answers = Console(), Answers()
    client = cast(RestateClient, answers)
    down = Health(service_down=True, since=100.0)
    console.saw(down)
    assert console._outage is not None
    seen_at = console._outage[1]
    shown = await console.remembered(client, Health())
    assert shown is down
    console.saw(shown)  # shown from memory: the time it was seen does not move on
    await console.remembered(client, Health())
    assert answers.asked == [seen_at, seen_at]
    answers.answered = True
    assert (await console.remembered(client, Health())).service_down is False
    assert console._outage is None
    fresh: Any = Health(service_down=True, since=200.0)
    assert await console.remembered(client, fresh) is fresh  # Restate's own evidence comes first
