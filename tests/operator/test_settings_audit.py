"""Changes of the service's settings in the audit log, through a real stack of its own: each
deployment names its audited settings at discovery, and a deployment whose settings differ from the
one before is recorded once, at the moment it was registered, by whoever reads the log first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from deployment_stack import DeploymentStack, deployment_stack

from replenisher.domain.audit import AuditRecord
from replenisher.operations.audit import append_audit
from replenisher.operations.restate.deployments import Registered
from replenisher.operations.settings_audit import settings_changes
from support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeploymentStack]:
    with deployment_stack(tmp_path_factory.mktemp("settings-audit")) as own:
        yield own


async def logged(stack: DeploymentStack) -> list[dict[str, Any]]:
    result = await stack.cli("audit", "--format", "json")
    assert result.code == 0, result
    entries: list[dict[str, Any]] = json.loads(result.out)
    return entries


async def test_a_deployment_with_other_settings_is_recorded_once_with_what_changed(stack: DeploymentStack) -> None:
    stack.deploy("s1")
    changed = stack.deploy("s2", env={"REPLENISHER_BACKUP_APPROVER": "ines", "REPLENISHER_APPROVAL_WAIT_DAYS": "5"})
    stack.deploy("s3", env={"REPLENISHER_BACKUP_APPROVER": "ines", "REPLENISHER_APPROVAL_WAIT_DAYS": "5"})

    async def recorded() -> list[dict[str, Any]] | None:
        found = [e for e in await logged(stack) if e["event"] == "settings_changed"]
        return found or None

    found = await eventually(recorded, timeout=60, what="the settings change in the audit log")
    assert [e["who"] for e in found] == [f"deployment {changed}"], "s3 has s2's settings: no change to record"
    entry = found[0]
    assert entry["what"].startswith("code s2: ") and entry["via"] == "restate" and entry["outcome"] == "done"
    assert "REPLENISHER_BACKUP_APPROVER: backup-approver -> ines" in entry["what"]
    assert "REPLENISHER_APPROVAL_WAIT_DAYS: " in entry["what"] and " -> 5" in entry["what"]
    registered = {d.id: d for d in await stack_deployments(stack)}
    assert entry["at"] == registered[changed].created_at, "dated when the deployment was registered"

    # Read again (and the console's Audit page would do the same): nothing is added. Bounded by an
    # event: a marker appended after those reads is in the log, so any second copy would be too.
    for _ in range(2):
        await logged(stack)
    marker = AuditRecord(
        at=time.time(), event="sign_in", who="marker", via="test", what="after the reads", outcome="done"
    )
    async with httpx.AsyncClient() as client:
        await append_audit(stack.restate.ingress_url, marker, client=client)

    async def after_marker() -> list[dict[str, Any]] | None:
        entries = await logged(stack)
        return entries if any(e["who"] == "marker" for e in entries) else None

    entries = await eventually(after_marker, timeout=60, what="the marker in the audit log")
    assert [e["who"] for e in entries if e["event"] == "settings_changed"] == [f"deployment {changed}"]


async def stack_deployments(stack: DeploymentStack) -> list[Registered]:
    from replenisher.operations.restate.client import RestateClient

    async with RestateClient(stack.restate.ingress_url, stack.restate.admin_url) as client:
        return await client.registered_deployments()


def test_only_deployments_that_named_their_settings_are_compared_and_only_differences_said() -> None:
    def deployment(n: int, settings: dict[str, str] | None) -> Registered:
        return Registered(id=f"dp_{n}", endpoint=f"http://svc{n}/", created_at=1000.0 + n, settings=settings,
                          code_version=f"v{n}")  # fmt: skip

    a = {"REPLENISHER_BACKUP_APPROVER": "backup-approver", "REPLENISHER_DECIDER": "offline"}
    b = {**a, "REPLENISHER_DECIDER": "claude"}
    records = settings_changes([deployment(3, b), deployment(1, a), deployment(2, None), deployment(4, b)])
    assert [(r.who, r.what, r.at) for r in records] == [
        ("deployment dp_3", "code v3: REPLENISHER_DECIDER: offline -> claude", 1003.0)
    ]
    assert settings_changes([deployment(1, a), deployment(2, {**a, "REPLENISHER_NEW": "x"})])[0].what == (
        "code v2: REPLENISHER_NEW: (unset) -> x"
    )
