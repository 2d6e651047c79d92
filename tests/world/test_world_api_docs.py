"""The docs' page on the simulated world's API, run as written against a real world process.

The commands are read from the docs themselves (the ```sh blocks of docs/world-api.md, then those
of "Rehearsing the failure stories", docs/failures/rehearsing.md), run with the real `curl` in the
order written, against a fresh world on a free port: each must answer 2xx and show what its
comment line names in backticks. The API page must also cover every route of the world's route
table and name every fault a supplier can be given, so an endpoint or a fault added later cannot
go undocumented.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from simulated_world.app import router
from simulated_world.faults import SupplierFaults
from support import commented_commands, doc_section

from .support import FakeIngress, WorldProcess, launch_world

API_PAGE = ("world-api.md", "# The simulated world's API")
REHEARSAL = ("failures/rehearsing.md", "# Rehearsing the failure stories")
DOCUMENTED_HOST = "localhost:9100"
CURL = shutil.which("curl")


@dataclass
class Documented:
    says: str
    command: str

    @property
    def shows(self) -> list[str]:
        return re.findall(r"`([^`]+)`", self.says.split("shows", 1)[-1]) if "shows" in self.says else []

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def method(self) -> str:
        argv = self.argv
        return argv[argv.index("-X") + 1] if "-X" in argv else "GET"

    @property
    def path(self) -> str:
        [url] = [a for a in self.argv if a.startswith(DOCUMENTED_HOST)]
        return url.removeprefix(DOCUMENTED_HOST).split("?", 1)[0]


def documented() -> list[Documented]:
    """The API page's commands, then the rehearsal's faults, in the order a reader meets them."""
    text = doc_section(*API_PAGE) + doc_section(*REHEARSAL)
    return [Documented(says, command) for says, command in commented_commands(text)]


def route_matches(segments: tuple[str, ...], path: str) -> bool:
    parts = path.strip("/").split("/")
    return len(parts) == len(segments) and all(
        s.startswith("{") or s == p for s, p in zip(segments, parts, strict=True)
    )


def test_every_route_of_the_world_has_a_documented_example() -> None:
    commands = documented()
    assert all(c.command.startswith("curl ") for c in commands), [c.command for c in commands]
    assert all(c.shows for c in commands), [c.command for c in commands if not c.shows]
    missing = [
        f"{r.method} /{'/'.join(r.segments)}"
        for r in router.routes
        if not any(c.method == r.method and route_matches(r.segments, c.path) for c in commands)
    ]
    assert not missing, f"world endpoints with no example on docs/{API_PAGE[0]}: {missing}"


def test_every_fault_is_named_in_the_section() -> None:
    text = doc_section(*API_PAGE)
    unnamed = [name for name in SupplierFaults.model_fields if f"`{name}`" not in text]
    assert not unnamed, f"faults not described on docs/{API_PAGE[0]}: {unnamed}"


def test_the_route_check_fires_for_an_undocumented_route() -> None:
    # Positive control: a route with no example is caught by the same matching.
    commands = documented()
    assert not any(c.method == "PATCH" and route_matches(("admin", "items", "{sku}"), c.path) for c in commands)
    assert any(c.method == "PUT" and route_matches(("admin", "items", "{sku}"), c.path) for c in commands)


@pytest_asyncio.fixture(loop_scope="session")
async def fresh_world(fake_ingress: FakeIngress, tmp_path: Path) -> AsyncIterator[WorldProcess]:
    # Long business days: nothing the world schedules falls due while the examples run.
    process = await launch_world(tmp_path, ingress_url=fake_ingress.url, day_seconds=3600)
    yield process
    assert await process.stop() == 0, process.log_text()


@pytest.mark.skipif(CURL is None, reason="needs curl")
async def test_the_documented_calls_answer_what_the_docs_say(fresh_world: WorldProcess) -> None:
    assert CURL is not None
    host = fresh_world.url.removeprefix("http://")
    for c in documented():
        argv = [a.replace(DOCUMENTED_HOST, host) for a in c.argv]
        argv[0] = CURL
        process = await asyncio.create_subprocess_exec(
            *argv, "-sS", "-w", "\n%{http_code}", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, f"{c.command}\n{err.decode()}"
        body, _, status = out.decode().rpartition("\n")
        assert status.startswith("2"), f"{c.command}\nanswered {status}: {body}"
        for expected in c.shows:
            assert expected in body, f"{c.command}\nshould show {expected!r}; it answered:\n{body}"
