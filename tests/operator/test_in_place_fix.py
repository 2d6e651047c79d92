"""Fixing runs that already wait (docs/deploying/upgrading.md, "Fixing runs that already wait"),
with the page's commands run as written, through a real stack of its own.

Two runs wait for the manager on deployment A (code v1). Three deployments are registered beside it:
the fix B under A's version, a broken fix D (a step renamed: it cannot replay the runs' journals) and
the fix C under another version, v2. One run is paused and resumed on B; the other on D, where Restate
refuses to replay it (RT0016, at the renamed step), so it is paused again and resumed on C. A is
stopped for good: nothing can run there. Both runs are then approved and finish, on B and on C,
judged from the world's records (one order each, the goods received) and each run's state: every
turn of the run on B is labelled v1; on C, the turns A ran are labelled v1 (the journal says so, and
the replay on v2 writes the same state) and those first run on C are labelled v2. A is drained and
safe to remove.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from deployment_stack import DeploymentStack, deployment_stack
from operator_support import CliResult

from support import doc_section, eventually, sh_blocks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

BROKEN_FIX = "tests.upgrade.planted:renamed_step_app()"

SECTION = doc_section("deploying/upgrading.md", "## Fixing runs that already wait")


def documented() -> list[str]:
    [block] = sh_blocks(SECTION)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


LIST, PAUSE, RESUME = documented()


async def run_documented(stack: DeploymentStack, command: str, **values: str) -> CliResult:
    for placeholder, value in values.items():
        command = command.replace(f"<{placeholder.replace('_', ' ')}>", value)
    assert "<" not in command, f"a placeholder left in {command!r}"
    program, *args = shlex.split(command)
    if program == ".venv/bin/replenisher":
        result = await stack.cli(*args)
    else:
        assert program == ".venv/bin/restate", command
        result = await stack.restate_cli(*args)
    assert result.code == 0, f"{command}\n{result}"
    return result


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeploymentStack]:
    with deployment_stack(tmp_path_factory.mktemp("in-place-fix")) as own:
        yield own


async def test_a_waiting_run_moved_to_the_fixed_deployment_finishes_there_once(stack: DeploymentStack) -> None:
    a = stack.deploy("v1", name="a")
    async with stack.scenario("fix-same") as first, stack.scenario("fix-other") as second:
        runs = {}
        for scenario in (first, second):
            run_id = (await scenario.check())["started"]
            runs[run_id] = (scenario, (await scenario.pending_approval())["po_number"])
            await scenario.waiting_for(run_id, "wait_for_approval")
        first_run, second_run = runs
        for run_id in runs:
            await stack.suspended(run_id)
        b = stack.deploy("v1", name="b")
        d = stack.deploy("v2", name="d", app=BROKEN_FIX)
        c = stack.deploy("v2", name="c")  # the newest: the SKUs' calls go to it

        listed = json.loads((await run_documented(stack, LIST)).out)
        [on_a] = [d for d in listed["deployments"] if d["id"] == a]
        ids = {call["target"]: call["id"] for call in on_a["in_flight"] if call["kind"] == "Replenish"}
        assert set(ids) == {f"Replenish/{run_id}/run" for run_id in runs}, on_a
        first_id, second_id = (ids[f"Replenish/{run_id}/run"] for run_id in runs)

        for invocation_id, fixed in ((first_id, b), (second_id, d)):
            await run_documented(stack, PAUSE, invocation_id=invocation_id)
            await run_documented(stack, RESUME, invocation_id=invocation_id, fixed_deployment_id=fixed)
        assert (await stack.run_invocation(first_run))["pinned_deployment_id"] == b
        stack.services["a"].stop()  # A is gone: nothing can run there any more

        async def refused_on_d() -> dict[str, Any] | None:
            row = await stack.run_invocation(second_run)
            return row if row["last_failure_error_code"] == "RT0016" else None

        refused = await eventually(refused_on_d, timeout=60, what="Restate to refuse the replay on D")
        assert refused["pinned_deployment_id"] == d and "_renamed" in refused["last_failure"], refused
        if refused["status"] != "paused":
            await run_documented(stack, PAUSE, invocation_id=second_id)
        await run_documented(stack, RESUME, invocation_id=second_id, fixed_deployment_id=c)

        for scenario, po_number in runs.values():
            await scenario.decide(po_number, approved=True)
        for run_id, fixed in ((first_run, b), (second_run, c)):
            scenario = runs[run_id][0]
            assert (await scenario.outcome(run_id, within=90))["outcome"] == "received", run_id
            orders = await scenario.orders()
            assert len(orders) == 1, orders
            assert (await stack.run_invocation(run_id))["pinned_deployment_id"] == fixed
        first_history = (await runs[first_run][0].run_view(first_run))["state"]["history"]
        assert first_history[-1]["tool"] == "done" and {turn["code"] for turn in first_history} == {"v1"}
        # On C: A's turns, up to the wait it was moved in, as A stamped them; the rest as C ran them.
        history = (await runs[second_run][0].run_view(second_run))["state"]["history"]
        tools, codes = [turn["tool"] for turn in history], [turn["code"] for turn in history]
        moved = tools.index("wait_for_approval") + 1
        assert tools[-1] == "done" and "place_order" in tools[moved:], tools
        assert codes == ["v1"] * moved + ["v2"] * (len(codes) - moved), list(zip(tools, codes, strict=True))

        async def a_safe() -> bool:
            result = await stack.cli("deployments", "--json")
            [d] = [d for d in json.loads(result.out)["deployments"] if d["id"] == a]
            return bool(d["drained"] and d["safe_to_remove"])

        await eventually(a_safe, timeout=30, what="A drained and safe to remove")
