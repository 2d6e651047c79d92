"""`replenisher deployments` and `deployments prune` through a real stack of their own.

Three deployments of the service, each with its own code version: v1 ran a replenishment to its
end and is drained; v2 has a run waiting for the manager's approval; v3 is the newest, where new
calls go. The list says so from Restate's records (the code version each one named at discovery,
what is in flight by kind and by wait); prune refuses to remove v2 (in flight) and v3 (newest),
asks before removing anything, and removes only v1. Then v2's run still finishes on v2, and v2 is
drained and safe to remove in its turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from deployment_stack import DeploymentStack, deployment_stack

from replenisher.stack.ports import free_port
from support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeploymentStack]:
    with deployment_stack(tmp_path_factory.mktemp("deployments")) as own:
        yield own


async def listed(stack: DeploymentStack) -> dict[str, Any]:
    result = await stack.cli("deployments", "--format", "json")
    assert result.code == 0, result
    return {d["id"]: d for d in json.loads(result.out)["deployments"]}


@pytest.mark.slow
async def test_the_list_says_what_runs_where_and_prune_removes_only_the_drained_superseded_one(
    stack: DeploymentStack,
) -> None:
    v1 = stack.deploy("v1")
    async with stack.scenario("dep-old") as old:
        run = (await old.check())["started"]
        await old.decide((await old.pending_approval())["po_number"], approved=False)
        assert (await old.outcome(run))["outcome"] == "rejected"

    v2 = stack.deploy("v2")
    async with stack.scenario("dep-waiting") as waiting:
        waiting_run = (await waiting.check())["started"]
        request = await waiting.pending_approval()
        await waiting.waiting_for(waiting_run, "wait_for_approval")
        v3 = stack.deploy("v3")

        async def v1_drained() -> dict[str, Any] | None:
            found = await listed(stack)
            return found if found[v1]["drained"] else None

        found = await eventually(v1_drained, timeout=30, what="v1 to have nothing in flight")
        assert {d: found[d]["code_version"] for d in (v1, v2, v3)} == {v1: "v1", v2: "v2", v3: "v3"}
        assert all(found[d]["code_version_from"] == "discovery" for d in (v1, v2, v3))
        assert found[v1]["safe_to_remove"] and found[v1]["newest_for"] == []
        in_flight = [c for c in found[v2]["in_flight"] if c["kind"] == "Replenish"]
        assert [c["target"] for c in in_flight] == [f"Replenish/{waiting_run}/run"]
        assert found[v2]["by_wait"].get("approval") == 1 and found[v2]["by_kind"].get("Replenish") == 1
        assert not found[v2]["drained"] and not found[v2]["safe_to_remove"]
        assert "in flight on it" in found[v2]["why"]
        assert found[v3]["drained"] and not found[v3]["safe_to_remove"]
        services = ["AuditLog", "Replenish", "RunArchive", "ServiceAnswered", "SkuAgent", "SkuList"]
        assert sorted(found[v3]["newest_for"]) == services

        text = await stack.cli("deployments")
        assert text.code == 0, text
        assert f"{v2}  code v2" in text.out and "by wait: approval 1" in text.out, text
        assert "safe to remove: yes (drained and superseded: safe to remove)" in text.out, text
        assert "deployments: registered=3 drained=2 safe_to_remove=1" in text.out, text

        # Named, a deployment with a run in flight is refused, and so is the newest: nothing is removed.
        for busy, why in ((v2, "not drained: 1 invocation in flight"), (v3, "the newest for")):
            refused = await stack.cli("deployments", "prune", "--yes", v1, busy)
            assert refused.code == 1 and f"{busy} is not safe to remove" in refused.err and why in refused.err, refused
        bogus = await stack.cli("deployments", "prune", "--yes", "dp_nosuchdeployment")
        assert bogus.code == 1 and "no deployment dp_nosuchdeployment is registered" in bogus.err, bogus

        declined = await stack.cli("deployments", "prune", stdin="n\n")
        assert declined.code == 1 and f"to remove: {v1} (code v1)" in declined.err, declined
        assert "nothing removed" in declined.err, declined
        assert {d.id for d in stack.admin.deployments()} == {v1, v2, v3}

        pruned = await stack.cli("deployments", "prune", stdin="y\n")
        assert pruned.code == 0 and f"removed {v1}" in pruned.out, pruned
        assert {d.id for d in stack.admin.deployments()} == {v2, v3}
        again = await stack.cli("deployments", "prune", "--yes")
        assert again.code == 0 and "nothing to prune" in again.out, again

        # The run on v2 was never disturbed: approved, it finishes there, and v2 drains.
        await waiting.decide(request["po_number"], approved=True)
        try:
            outcome = await waiting.outcome(waiting_run, within=60)
        except AssertionError as e:
            # Say where the run stood, to tell a wedge from slowness or a refusal (CI saw a quote expire
            # under the operator steps above: the run asked again, as it should).
            view = await waiting.run_view(waiting_run)
            refused = (view.get("state") or {}).get("last_failure")
            calls = await stack.admin.asql(
                "SELECT id, target, status, last_failure, pinned_deployment_id FROM sys_invocation "
                f"WHERE target LIKE '%{waiting_run}%' OR target LIKE '%{waiting.sku}%'"
            )
            promises = await stack.admin.asql(
                "SELECT key, completed, completion_success_value_utf8 FROM sys_promise "
                f"WHERE service_key = '{waiting_run}'"
            )
            run_ids = [c["id"] for c in calls if c["target"] == f"Replenish/{waiting_run}/run"]
            journal = await stack.admin.asql(f"SELECT * FROM sys_journal WHERE id = '{run_ids[0]}' ORDER BY index")
            journal = [{k: v for k, v in j.items() if k not in ("raw", "id")} for j in journal]
            calls = [c for c in calls if not c["target"].endswith("/status")]
            raise AssertionError(
                f"{e}\nlast failure: {refused}\nwaiting: {view.get('waiting')}\ninvocations: {calls}"
                f"\npromises: {promises}\njournal: {journal[-25:]}"
            ) from e
        assert outcome["outcome"] == "received"
        history = (await waiting.run_view(waiting_run))["state"]["history"]
        assert {turn["code"] for turn in history} == {"v2"}

        async def v2_safe() -> bool:
            return bool((await listed(stack))[v2]["safe_to_remove"])

        await eventually(v2_safe, timeout=30, what="v2 to be drained and safe to remove")
        pruned = await stack.cli("deployments", "prune", "--yes", "--json")
        assert pruned.code == 0 and json.loads(pruned.out) == {"removed": [v2], "kept": {}}, pruned
        assert {d.id for d in stack.admin.deployments()} == {v3}


async def test_restate_unreachable_is_one_clear_line_and_exit_3(stack: DeploymentStack) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    for args in (("deployments",), ("deployments", "prune", "--yes")):
        result = await stack.cli(*args, "--admin-url", nowhere, "--ingress-url", nowhere)
        assert result.code == 3, result
        assert result.err.count("\n") == 1 and "Restate is unreachable" in result.err and "make up" in result.err
        assert result.out == ""


@pytest.mark.parametrize(
    ("argv", "as_json", "ingress"),
    [
        (["deployments", "--json", "prune"], True, None),
        (["deployments", "prune", "--json"], True, None),
        (["deployments", "--ingress-url", "http://restate:8080", "prune", "--yes"], False, "http://restate:8080"),
        (["deployments", "prune"], False, None),
    ],
)
def test_options_given_before_prune_keep_their_value(argv: list[str], as_json: bool, ingress: str | None) -> None:
    from replenisher.cli import parser

    args, extra = parser().parse_known_args(argv)
    assert not extra and (args.json, args.ingress_url, args.deployments_command) == (as_json, ingress, "prune")
