"""The docs' `restate` CLI commands, run as written against the real CLI binary and server.

The commands are read from the docs page itself (the ```sh block of docs/operating/restate-cli.md,
"Inspecting with the restate CLI"), so the docs cannot drift from what works: each comment line says what the
command below it shows, in backticks, and this test checks the output for each of them.
`SKU-101` stands for this test's SKU, `<invocation id>` for its run's id.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
from dataclasses import dataclass

import httpx
import pytest
from operator_support import setup_lasting_quotes

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin
from replenisher.stack.install import ensure_restate
from replenisher.stack.runtime import RestateRuntime
from support import RegisteredService, commented_commands, doc_section, eventually

pytestmark = pytest.mark.e2e

PAGE, SECTION = "operating/restate-cli.md", "# Inspecting with the restate CLI"
WHILE_DOWN = "while the service is down"


@dataclass
class Documented:
    says: str
    command: str

    @property
    def shows(self) -> list[str]:
        return re.findall(r"`([^`]+)`", self.says.split("shows", 1)[-1])


def documented() -> list[Documented]:
    return [Documented(says, command) for says, command in commented_commands(doc_section(PAGE, SECTION))]


def test_every_documented_command_says_what_it_shows() -> None:
    commands = documented()
    assert len(commands) >= 10
    for c in commands:
        assert c.command.startswith(".venv/bin/restate "), c.command
        assert c.shows, f"no `shows` for {c.command!r}"
    asked = " ".join(c.command for c in commands)
    for needed in (
        "invocations list",
        "invocations describe",
        "kv get",
        "sys_invocation",
        "sys_journal",
        "sys_promise",
    ):
        assert needed in asked
    assert "FROM state" in asked


async def run_documented(c: Documented, sku: str, invocation_id: str, admin_url: str) -> str:
    argv = shlex.split(c.command.replace("SKU-101", sku).replace("<invocation id>", invocation_id))
    argv[0] = str(ensure_restate().cli)
    env = {**os.environ, "RESTATE_ADMIN_URL": admin_url, "NO_COLOR": "1", "COLUMNS": "400"}
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, f"{c.command}\nexit {process.returncode}\n{out.decode()}\n{err.decode()}"
    return out.decode()


async def test_the_documented_commands_show_what_the_docs_say(
    scenario: Scenario,
    service: RegisteredService,
    restate_runtime: RestateRuntime,
    admin: Admin,
    ingress: httpx.AsyncClient,
) -> None:
    await setup_lasting_quotes(scenario)
    await scenario.fault(down_calls=1)  # a retried step for the "which steps were retried" query
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    [row] = await admin.asql(f"SELECT id FROM sys_invocation WHERE target = 'Replenish/{run_id}/run'")

    commands = documented()
    now = [c for c in commands if WHILE_DOWN not in c.says]
    later = [c for c in commands if WHILE_DOWN in c.says]
    for c in now:  # while the run waits for the manager
        out = await run_documented(c, scenario.sku, row["id"], restate_runtime.admin_url)
        for expected in c.shows:
            expected = expected.replace("SKU-101", scenario.sku)
            assert expected in out, f"{c.command}\nshould show {expected!r}; it printed:\n{out}"

    service.kill()
    decision = {"po_number": request["po_number"], "token": request["token"], "approved": False}
    sent = await ingress.post(f"/SkuAgent/{scenario.sku}/deliver/send", json={"event": "approval", "payload": decision})
    assert sent.status_code == 202, sent.text

    async def backing_off() -> bool:
        rows = await admin.asql(
            f"SELECT last_failure FROM sys_invocation WHERE target = 'SkuAgent/{scenario.sku}/deliver' "
            "AND status = 'backing-off'"
        )
        return bool(rows) and "onnection refused" in (rows[0]["last_failure"] or "")

    try:
        await eventually(backing_off, timeout=20, what="the message to be retried while the service is down")
        for c in later:
            out = await run_documented(c, scenario.sku, row["id"], restate_runtime.admin_url)
            for expected in c.shows:
                expected = expected.replace("SKU-101", scenario.sku)
                assert expected in out, f"{c.command}\nshould show {expected!r}; it printed:\n{out}"
    finally:
        service.restart()
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "rejected", "the message arrived after all"
