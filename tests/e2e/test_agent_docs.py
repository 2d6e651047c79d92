"""The docs' commands for talking to a SKU's agent (docs/operating/agent.md), for the CLI
(docs/operating/cli.md) and for a SKU's own wait lengths (docs/operating/settings.md), run as written
against this session's stack: the curl commands with the real `curl`, the CLI's through
`replenisher.cli`, `localhost:8080` and `localhost:9100` being this session's ingress and world,
`SKU-101` this test's SKU. Each must answer 2xx (exit 0), and what the pages promise is judged from
the SKU's record."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import Scenario
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import RestateRuntime
from support import RegisteredService, doc_section, sh_blocks

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")]

INGRESS, WORLD = "localhost:8080", "localhost:9100"


def commands(block: str) -> list[list[str]]:
    """A block's commands as argv, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [argv for line in joined.splitlines() if (argv := shlex.split(line, comments=True))]


@dataclass
class Stack:
    ingress: str
    admin: str
    world: str
    cwd: Path  # where a command writes what it names (the CLI's `--html run.html`)

    def here(self, arg: str) -> str:
        """A documented address on this stack: the ingress and world on their free ports."""
        for documented, real in ((INGRESS, self.ingress), (WORLD, self.world)):
            if arg.startswith(documented):
                return real + arg.removeprefix(documented)
        return arg

    async def run(self, argv: list[str]) -> tuple[str, str]:
        """One documented command as written, on this stack: its output, and its HTTP status for curl."""
        curl = argv[0] == "curl"
        if curl:
            argv = [shutil.which("curl") or "curl", *(self.here(a) for a in argv[1:])]
            argv += ["-sS", "-w", "\n%{http_code}"]
        else:
            assert argv[0] == ".venv/bin/replenisher", argv
            argv = [sys.executable, "-m", "replenisher.cli", *argv[1:]]
        env = {
            **os.environ,
            "REPLENISHER_INGRESS_URL": f"http://{self.ingress}",
            "REPLENISHER_ADMIN_URL": f"http://{self.admin}",
            "REPLENISHER_WORLD_URL": f"http://{self.world}",
        }
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=self.cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, f"{shlex.join(argv)}\nexit {process.returncode}\n{out.decode()}{err.decode()}"
        if not curl:
            return out.decode(), ""
        body, _, status = out.decode().rpartition("\n")
        return body, status


@pytest.fixture
def stack(service: RegisteredService, restate_runtime: RestateRuntime, world: HypercornApp, tmp_path: Path) -> Stack:
    def host(url: str) -> str:
        return url.removeprefix("http://").rstrip("/")

    return Stack(host(restate_runtime.ingress_url), host(restate_runtime.admin_url), host(world.url), tmp_path)


def as_this_tests(block: str, scenario: Scenario) -> str:
    # The goods receipt's id is the world's, across every test of the session: this test's own.
    return re.sub(r"\br1\b", f"r1-{scenario.sku}", block.replace("SKU-101", scenario.sku))


async def test_talking_to_an_agent_works_as_written(scenario: Scenario, stack: Stack) -> None:
    await scenario.setup()  # below its safety stock: the documented check starts run 1
    curls, cli = sh_blocks(doc_section("operating/agent.md", "# Talking to an agent"))[:2]
    for argv in commands(as_this_tests(curls, scenario)):
        body, status = await stack.run(argv)
        assert status.startswith("2"), f"{shlex.join(argv)}\nanswered {status}: {body}"
    for argv in commands(as_this_tests(cli, scenario)):
        await stack.run(argv)

    status = await scenario.status()
    assert status["active"]["run_id"] == f"replenish-{scenario.sku}-1"
    assert not status["watch"]["watching"], "unwatched, as the block ends"
    # The curl and the CLI sent the same goods under the same key: delivered once.
    messages = [*status["active"]["routed"], *status["kept"]]
    goods = [m for m in messages if m["event"] == "goods" and m["payload"]["receipt_id"] == f"r1-{scenario.sku}"]
    assert len(goods) == 1, messages


async def test_a_skus_own_wait_lengths_are_set_as_written(scenario: Scenario, stack: Stack) -> None:
    await scenario.setup(on_hand=50)  # no run: only the record changes
    [block] = sh_blocks(doc_section("operating/settings.md", "## A SKU's own wait lengths"))
    answers: list[dict[str, Any]] = []
    for argv in commands(as_this_tests(block, scenario)):
        body, status = await stack.run(argv)
        assert status.startswith("2"), f"{shlex.join(argv)}\nanswered {status}: {body}"
        answers.append(json.loads(body))
    first, second = (answer["waits"] for answer in answers)
    assert (first["approval"], first["supplier_reply"]) == (1, 3)
    # "approval stays 1; supplier_reply follows the settings again"
    assert (second["approval"], second["supplier_reply"]) == (1, None)
    assert (await scenario.status())["waits"] == second


async def test_the_cli_works_as_written(scenario: Scenario, stack: Stack) -> None:
    # The run asks the manager for 4.00, under the documented --up-to 4.40; its quote lasts the
    # world's longest (91 s): the commands before `approve` took over 30 s on a loaded machine.
    await scenario.setup(price=4.0, quote_valid_days=365)
    run_id = (await scenario.check())["started"]
    await scenario.pending_approval()
    [block] = sh_blocks(doc_section("operating/cli.md", "# The CLI"))
    shown: dict[str, str] = {}
    for argv in commands(as_this_tests(block, scenario)):
        shown[shlex.join(argv[1:3])] = (await stack.run(argv))[0]
    # The session's stack may hold more agents than a page: the plain list has its columns, the
    # searched one this run.
    assert shown["skus"].startswith("SKU ") and "active run" in shown["skus"], shown["skus"]
    assert run_id in shown["skus --search"], shown["skus --search"]
    assert "4.4" in shown[f"approve {scenario.sku}"], "approve shows what the run did with the decision"
    assert (await scenario.run_view(run_id))["state"]["approval"]["channel"] == "operator"
    assert "<svg" in (stack.cwd / "run.html").read_text()
