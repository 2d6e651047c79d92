"""The page `replenisher replay --html` writes, in a real headless Chromium at desktop and phone width.

A real run of the corpus (recorded by the real stack), replayed with a decider that parts from
it at turn 4 and goes on while the record answers: the page must frame that turn, mark the
turns the replay never reached, pass axe-core, and not stick out of a phone's screen. With
REPLENISHER_SCREENSHOT_DIR set (`make screenshots`) it also takes the docs' picture.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from page_checks import DESKTOP, PHONE, assert_page_fit_for_everyone

from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.policy import choose
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.replay.core import read_archive, replay
from replenisher.timeline import replayed
from support import REPO_ROOT

RUN = REPO_ROOT / "tests" / "fixtures" / "runs" / "replenish-SKU-109-1.json"
SHOTS = os.environ.get("REPLENISHER_SCREENSHOT_DIR")


class StopsAtTheOrder:
    """The offline policy, except that at the order (turn 4) it gives up instead."""

    name = "a cautious policy"

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision:
        if len(state.history) == 4:
            return Decision(tool="done", reason="would not order at this price", decider=self.name)
        return choose(state, [t.name for t in allowed])


async def test_the_replay_page_frames_the_turn_where_they_part_at_desktop_and_phone_width(
    browser: Any, axe: Path, artifacts: Path
) -> None:
    archive = read_archive(json.loads(RUN.read_text()))
    report = await replay(archive, StopsAtTheOrder(), keep_going=True)
    assert report.first_divergence is not None and report.first_divergence.turn == 4
    html = replayed.render_html([replayed.build(archive, report)])
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page = await browser.new_page(viewport=viewport)
        try:
            await page.set_content(html)
            parted = page.locator("tr.parts")
            assert await parted.count() == 1
            assert await parted.get_attribute("data-turn") == "4"
            text = await parted.inner_text()
            assert "place_order" in text and "done (differs)" in text and "would not order at this price" in text
            assert await page.locator("svg g.parts-here").count() == 1
            unreached = await page.get_by_text("not replayed: the replay stopped before this turn").count()
            assert unreached == len(archive.decisions) - 5
            await assert_page_fit_for_everyone(page, axe, f"the replay page at {name} width")
            await page.screenshot(path=str(artifacts / f"replay-{name}.png"), full_page=True)
            if SHOTS:
                path = Path(SHOTS) / f"replay-{name}.png"
                await page.screenshot(path=str(path))
                assert path.stat().st_size < 150_000, f"{path} is {path.stat().st_size} bytes"
        finally:
            await page.close()
