"""A versioned branch (`engine.patched`, docs/deploying/upgrading.md "Versioned branches") through a real
stack of its own: a run started on the old code, moved to the patched code, and a run started there.

Deployment A runs the service as it is (v1); B (v2) serves it with one patch and one branch on it
(`tests/upgrade/patched.py`: the new branch marks a wait's summary). A run starts on A and waits for the
manager; B is registered, a second SKU's run starts on B and waits too; the first is paused and resumed on
B (it replays A's journal there: the branch's old side must do what A did), and A is stopped. Both are
approved and finish on B, one order each in the world's records. Each took its own branch, as its state
shows: the old run's wait that A began stays unmarked (it was decided on code without the patch) and its
later waits, decided on B, are marked; every wait of the new run is marked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from deployment_stack import DeploymentStack, deployment_stack

from upgrade.patched import MARK

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PATCHED_APP = "tests.upgrade.patched:marked_waits_app()"
WAITS = ("wait_for_approval", "wait_for_supplier_reply", "wait_for_goods")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeploymentStack]:
    with deployment_stack(tmp_path_factory.mktemp("patched")) as own:
        yield own


def waits(history: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """Each wait turn: its tool, its code label, and whether the new branch marked it."""
    return [(t["tool"], t["code"], t["summary"].endswith(MARK)) for t in history if t["tool"] in WAITS]


async def test_an_old_run_moved_to_patched_code_and_a_new_run_there_each_take_their_own_branch(
    stack: DeploymentStack,
) -> None:
    a = stack.deploy("v1", name="a")
    async with stack.scenario("patch-old") as old, stack.scenario("patch-new") as new:
        old_run = (await old.check())["started"]
        old_po = (await old.pending_approval())["po_number"]
        await old.waiting_for(old_run, "wait_for_approval")
        await stack.suspended(old_run)

        b = stack.deploy("v2", name="b", app=PATCHED_APP)
        new_run = (await new.check())["started"]
        new_po = (await new.pending_approval())["po_number"]
        await new.waiting_for(new_run, "wait_for_approval")
        assert (await stack.run_invocation(new_run))["pinned_deployment_id"] == b
        assert (await stack.run_invocation(old_run))["pinned_deployment_id"] == a

        old_id = (await stack.run_invocation(old_run))["id"]
        for command in (["pause"], ["resume", "--deployment", b]):
            result = await stack.restate_cli("invocations", command[0], "--yes", old_id, *command[1:])
            assert result.code == 0, result
        stack.services["a"].stop()  # the old run can only go on on B now

        await old.decide(old_po, approved=True)
        await new.decide(new_po, approved=True)
        for scenario, run_id in ((old, old_run), (new, new_run)):
            assert (await scenario.outcome(run_id, within=120))["outcome"] == "received", run_id
            assert len(await scenario.orders()) == 1
            assert (await stack.run_invocation(run_id))["pinned_deployment_id"] == b

        old_waits = waits((await old.run_view(old_run))["state"]["history"])
        new_waits = waits((await new.run_view(new_run))["state"]["history"])
        assert old_waits == [
            ("wait_for_approval", "v1", False),
            ("wait_for_supplier_reply", "v2", True),
            ("wait_for_goods", "v2", True),
        ], old_waits
        assert [tool for tool, _, _ in new_waits] == list(WAITS) and all(
            code == "v2" and marked for _, code, marked in new_waits
        ), new_waits
