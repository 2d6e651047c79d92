"""The docs' page on the simulated world's API, run as written against a real world process.

The commands are read from the docs themselves (the ```sh blocks of docs/world-api.md, then those
of "Rehearsing the failure stories", docs/failures/rehearsing.md), run with the real `curl` in the
order written, against a fresh world on a free port: each must answer 2xx and show what its
comment line names in backticks. The API page is checked against the world's OpenAPI schema (the
one it serves at /openapi.json): every path and method of the schema has an example on the page,
and every path the page names is in the schema; and the page names every fault a supplier can be
given. So an endpoint or a fault added later cannot go undocumented, nor a removed one stay.
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

from simulated_world.app import api
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


SERVED_BESIDE_THE_SCHEMA = {"/openapi.json"}
"""Paths the world serves that its schema does not list: the schema itself."""


def schema_routes() -> list[tuple[str, tuple[str, ...]]]:
    """(method, path segments) of every operation in the world's OpenAPI schema."""
    paths: dict[str, dict[str, object]] = api.openapi()["paths"]
    return [(method.upper(), tuple(path.strip("/").split("/"))) for path, ops in paths.items() for method in ops]


def route_matches(segments: tuple[str, ...], path: str) -> bool:
    parts = path.strip("/").split("/")
    return len(parts) == len(segments) and all(
        s.startswith("{") or s == p for s, p in zip(segments, parts, strict=True)
    )


def test_every_operation_of_the_schema_has_a_documented_example() -> None:
    commands = documented()
    assert all(c.command.startswith("curl ") for c in commands), [c.command for c in commands]
    assert all(c.shows for c in commands), [c.command for c in commands if not c.shows]
    routes = schema_routes()
    assert len(routes) >= 30, routes  # the schema lists the world's routes, not an empty app's
    missing = [
        f"{method} /{'/'.join(segments)}"
        for method, segments in routes
        if not any(c.method == method and route_matches(segments, c.path) for c in commands)
    ]
    assert not missing, f"world endpoints with no example on docs/{API_PAGE[0]}: {missing}"


def test_every_path_the_page_names_is_in_the_schema() -> None:
    routes = schema_routes()
    unknown = [
        f"{c.method} {c.path}"
        for c in documented()
        if c.path not in SERVED_BESIDE_THE_SCHEMA
        and not any(c.method == method and route_matches(segments, c.path) for method, segments in routes)
    ]
    assert not unknown, f"docs/{API_PAGE[0]} names paths the world's schema does not have: {unknown}"


def test_every_fault_is_named_in_the_section() -> None:
    text = doc_section(*API_PAGE)
    unnamed = [name for name in SupplierFaults.model_fields if f"`{name}`" not in text]
    assert not unnamed, f"faults not described on docs/{API_PAGE[0]}: {unnamed}"


def test_the_route_checks_fire_for_an_undocumented_route_and_an_unknown_path() -> None:
    # Positive controls: a route with no example, and an example of no route, are caught by the same matching.
    commands = documented()
    routes = schema_routes()
    assert not any(c.method == "PATCH" and route_matches(("admin", "items", "{sku}"), c.path) for c in commands)
    assert any(c.method == "PUT" and route_matches(("admin", "items", "{sku}"), c.path) for c in commands)
    assert not any(method == "GET" and route_matches(segments, "/admin/nothing-here") for method, segments in routes)
    assert any(method == "GET" and route_matches(segments, "/erp/stock/SKU-101") for method, segments in routes)


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
