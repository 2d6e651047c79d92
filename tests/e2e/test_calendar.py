"""Business days on a site calendar, through the real stack with a compressed clock.

Each test brings up its own Restate, world and service, because the calendar and the clock
origin are settings of the whole process: a calendar day lasts `day_seconds`, working hours
are 09:00-17:00, and the calendar is at Friday 4 December 2026, 17:00 (the close of
business) as the stack starts coming up. The stack comes up and the run asks for approval
during the weekend, after Friday's close: no working time passes between the close and the
request, wherever in the weekend it falls, so the window's deadline is a fixed instant on
the calendar (the close of the next working day) and the test never races the clock for a
particular hour. The manager never answers, so the window lapses and the run fails closed.
When it lapsed is judged from the run's outcome and the world's own clock (it shares the
origin with the service).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import httpx
import pytest

from e2e.scenario import Scenario, ok
from replenisher.domain.calendar import CalendarClock, ClockOrigin, parse_calendar, utc_instant
from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp, service_server
from replenisher.stack.runtime import make_runtime
from support import REPO_ROOT, RESTATE_TEST_ENV, RegisteredService, service_env, world_env

pytestmark = pytest.mark.e2e

# The bound on the stack coming up and the run asking for approval: the non-working stretch from
# Friday's close to the next opening lasts this long in wall time, whatever its length on the
# calendar (64 hours over a weekend, 88 with a Monday holiday), so each test's calendar day is
# derived from it (about 8 s and 6 s) and its deadline comes a working day's 2-3 s later.
STARTUP_BOUND = 21.0
FRIDAY_CLOSE = utc_instant("2026-12-04T17:00")
SITE = "working_days = Mon Tue Wed Thu Fri\nworking_hours = 09:00-17:00\n"
APPROVAL_DAYS = 1


@dataclass
class Site:
    clock: CalendarClock
    scenario: Scenario
    world: httpx.AsyncClient

    async def world_calendar(self, wall: float) -> float:
        """The calendar instant the WORLD gives wall instant `wall` (from its clock, not ours)."""
        view = ok(await self.world.get("/admin/clock"))
        return float(view["calendar_now"] + (wall - view["now"]) * 86_400 / view["day_seconds"])

    async def world_date(self, wall: float) -> str:
        return _date(await self.world_calendar(wall))


@asynccontextmanager
async def site_stack(tmp_path: Path, log_dir: Path, holidays: list[date], opens: float) -> AsyncIterator[Site]:
    """The stack, on a calendar at Friday's close as it starts, whose next opening is `opens`."""
    day_seconds = round(STARTUP_BOUND * 86_400 / (opens - FRIDAY_CLOSE), 3)
    text = SITE + "".join(f"{d.isoformat()}\n" for d in holidays)
    calendar_file = tmp_path / "site.calendar"
    calendar_file.write_text(text)
    origin = time.time()
    clock = CalendarClock(
        calendar=parse_calendar(text),
        day_seconds=day_seconds,
        origin=ClockOrigin(wall=origin, calendar=FRIDAY_CLOSE),
    )
    shared = {"CLOCK_WALL_ORIGIN": repr(origin), "CLOCK_CALENDAR_ORIGIN": repr(FRIDAY_CLOSE)}
    runtime = make_runtime(
        os.environ.get("REPLENISHER_TEST_RUNTIME", "binary"),
        tmp_path / "restate",
        RESTATE_TEST_ENV,
        log_path=log_dir / f"restate-{tmp_path.name}.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    started: list[HypercornApp | RegisteredService] = []
    runtime.start()
    try:
        runtime.wait_ready()
        world = HypercornApp(
            WORLD_APP,
            free_port(),
            world_env(
                runtime.ingress_url,
                {
                    "WORLD_DAY_SECONDS": f"{day_seconds:g}",
                    "WORLD_CALENDAR_FILE": str(calendar_file),
                    **{f"WORLD_{k}": v for k, v in shared.items()},
                },
            ),
            name="world",
            log_path=log_dir / f"world-{tmp_path.name}.log",
        )
        world.start()
        started.append(world)
        world.wait_ready()
        env = {
            "REPLENISHER_DAY_SECONDS": f"{day_seconds:g}",
            "REPLENISHER_CALENDAR_FILE": str(calendar_file),
            # The window's own lapse is what these tests time: no escalation after it.
            "REPLENISHER_BACKUP_APPROVER": "none",
            **{f"REPLENISHER_{k}": v for k, v in shared.items()},
        }
        app = HypercornApp(
            SERVICE_APP,
            free_port(runtime.service_bind_host),
            service_env(world.url, env),
            name="replenisher",
            log_path=log_dir / f"replenisher-{tmp_path.name}.log",
            bind_host=runtime.service_bind_host,
            server=service_server(),
        )
        service = RegisteredService(runtime, app)
        service.start()
        started.append(service)
        timeout = httpx.Timeout(30.0, connect=5.0)
        async with (
            httpx.AsyncClient(base_url=runtime.ingress_url, timeout=timeout) as ingress,
            httpx.AsyncClient(base_url=world.url, timeout=timeout) as world_client,
        ):
            yield Site(clock, Scenario(ingress, world_client, tmp_path.name[:16]), world_client)
    finally:
        for process in reversed(started):
            process.stop()
        runtime.stop()


async def approval_lapses(site: Site, opens: float) -> tuple[float, float, float]:
    """A run asked for approval after Friday's close, before `opens` (the next working day's
    opening, a calendar instant), and nobody answered: (requested_at, deadline, ended_at)."""
    scenario = site.scenario
    await scenario.setup()
    await scenario.configure(approval=APPROVAL_DAYS)
    run_id = (await scenario.check())["started"]
    within = max(site.clock.to_wall(opens) - time.time(), 5.0)
    view = await scenario.waiting_for(run_id, "wait_for_approval", within=within)
    requested_at = view["state"]["approval"]["requested_at"]
    deadline = view["waiting"]["deadline"]
    # The run fixed the site's calendar file and the shared origin into itself at its start.
    assert CalendarClock.model_validate(view["waiting"]["clock"]) == site.clock
    # The bound on the stack coming up: the whole non-working stretch after Friday's close.
    asked = site.clock.to_calendar(requested_at)
    if not FRIDAY_CLOSE <= asked < opens:
        pytest.fail(f"the run asked on {site.clock.date_of(requested_at)}, not before {_date(opens)}: too slow")

    # The deadline is a wait of its own; the run's outcome says when it ended (not a sleep).
    outcome = await scenario.outcome(run_id, within=(deadline - time.time()) + 30)
    assert outcome["outcome"] == "cancelled"
    final = await scenario.run_view(run_id)
    assert final["state"]["approval"]["status"] == "timed_out"
    # Failed closed: nothing was ordered (the world's own records).
    assert await scenario.orders() == []
    [request] = await scenario.calls(op="request_approval")
    # The world saw the request in the same non-working stretch (its clock, not ours).
    assert FRIDAY_CLOSE <= await site.world_calendar(request["at"]) < opens, await site.world_date(request["at"])
    return requested_at, deadline, outcome["ended_at"]


def _date(calendar: float) -> str:
    return datetime.fromtimestamp(calendar, UTC).strftime("%a %Y-%m-%d %H:%M")


@pytest.mark.slow
async def test_a_request_after_fridays_close_lapses_at_mondays_close_not_over_the_weekend(
    tmp_path: Path, log_dir: Path
) -> None:
    monday_opens = utc_instant("2026-12-07T09:00")
    async with site_stack(tmp_path, log_dir, holidays=[], opens=monday_opens) as site:
        requested_at, deadline, ended_at = await approval_lapses(site, monday_opens)

        # One business day after a request in the weekend is Monday's working hours, all of them.
        assert deadline == pytest.approx(site.clock.to_wall(utc_instant("2026-12-07T17:00")), abs=1e-3)
        assert site.clock.business_days(requested_at, deadline) == pytest.approx(1.0)
        # The run waited through the weekend: it ended after Monday opened.
        assert site.clock.to_wall(monday_opens) < ended_at
        # On the world's calendar too the run gave up on Monday, at or after the deadline.
        assert ended_at >= deadline
        assert (await site.world_date(ended_at))[:3] == "Mon"


@pytest.mark.slow
async def test_a_holiday_in_the_approval_window_is_skipped(tmp_path: Path, log_dir: Path) -> None:
    # Monday 7 December is a holiday: the window is Tuesday's working hours.
    tuesday_opens = utc_instant("2026-12-08T09:00")
    async with site_stack(tmp_path, log_dir, holidays=[date(2026, 12, 7)], opens=tuesday_opens) as site:
        requested_at, deadline, ended_at = await approval_lapses(site, tuesday_opens)

        assert deadline == pytest.approx(site.clock.to_wall(utc_instant("2026-12-08T17:00")), abs=1e-3)
        assert site.clock.business_days(requested_at, deadline) == pytest.approx(1.0)
        # Monday's working hours passed with the run still waiting: it ended after Tuesday opened.
        assert site.clock.to_wall(tuesday_opens) < ended_at
        assert ended_at >= deadline
        assert (await site.world_date(ended_at))[:3] == "Tue"
