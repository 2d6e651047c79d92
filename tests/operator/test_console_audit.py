"""The audit log in the console, through the real stack: sign-ins, an edit of the people file (what
it changed) and a broken edit (refused, the last good matrix in force) each show on the day's
audit page, read back from Restate, with the chain checked."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from people.accounts import PASSWORDS, SESSION_SECRET, people_toml
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from support import RegisteredService, eventually, serving

pytestmark = pytest.mark.timeout(180)


@pytest_asyncio.fixture
async def console_with_file(
    operator_env: dict[str, str], service: RegisteredService, log_dir: Path, tmp_path: Path
) -> AsyncIterator[tuple[str, Path]]:
    people = tmp_path / "people.toml"
    people.write_text(people_toml(with_passwords=("ana", "vic")))
    port = free_port()
    env = {
        **operator_env,
        "REPLENISHER_PEOPLE_FILE": str(people),
        "REPLENISHER_CONSOLE_SESSION_SECRET": SESSION_SECRET,
        "REPLENISHER_CONSOLE_PUBLIC_URL": f"http://127.0.0.1:{port}",
    }
    app = HypercornApp("replenisher.console.app:create_app()", port, env, name=f"audit-console-{port}",
                       log_path=log_dir / f"audit-console-{port}.log")  # fmt: skip
    with serving(app):
        yield app.url, people


async def test_sign_ins_and_edits_of_the_people_file_show_on_the_audit_page(
    console_with_file: tuple[str, Path],
) -> None:
    url, people = console_with_file
    async with httpx.AsyncClient(base_url=url, timeout=30) as vic:
        page = await vic.get("/sign-in")
        csrf = re.search(r"name=csrf value='([^']+)'", page.text)
        assert csrf
        form = {"csrf": csrf.group(1), "person": "vic", "password": PASSWORDS["vic"], "next": "/audit"}
        assert (await vic.post("/sign-in", data=form)).status_code == 303

        async def audit_says(*wanted: str) -> str | None:
            answer = await vic.get("/audit")
            text = html.unescape(answer.text)
            return text if answer.status_code == 200 and all(w in text for w in wanted) else None

        text = await eventually(
            lambda: audit_says("sign in", "vic"), timeout=60, what="vic's sign-in on the audit page"
        )
        assert "chained: none changed or removed since written" in text

        good = people.read_text()
        people.write_text(good.replace("limit = 1000", "limit = 2500"))
        text = await eventually(
            lambda: audit_says("matrix changed", "ana: limit 1,000.00 -> 2,500.00"), timeout=60,
            what="the edit of the people file on the audit page",
        )  # fmt: skip
        people.write_text(good.replace("limit = 1000", 'limit = "lots"'))
        text = await eventually(
            lambda: audit_says("matrix refused", "limit: must be a number, got 'lots' (the last good matrix stays"),
            timeout=60, what="the refused edit on the audit page",
        )  # fmt: skip
        assert "refused" in text

        bad = await vic.get("/audit", params={"day": "yesterday"})
        assert bad.status_code == 400 and "is not a date" in html.unescape(bad.text)
        other = await vic.get("/audit", params={"day": "1999-01-01"})
        assert other.status_code == 200 and "0 entries" in other.text
