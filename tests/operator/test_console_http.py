"""The console's HTTP surface on the real stack: the headers every page carries, the static files
its pages load, and the error pages for a wrong path, method or form."""

from __future__ import annotations

import re

import httpx
import pytest

from replenisher.stack.processes import HypercornApp

pytestmark = pytest.mark.e2e


async def test_every_page_and_answer_is_not_stored_and_the_files_the_pages_load_are_served(
    console: HypercornApp,
) -> None:
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        # A page with a decision form holds its request's one-time token: never kept by a cache.
        for path in ("/inbox", "/inbox/fragment", "/skus", "/spend", "/skus/SKU-no-such-agent", "/nowhere", "/"):
            response = await http.get(path)
            assert response.headers["cache-control"] == "no-store", path
        home = await http.get("/")
        assert home.status_code == 303 and home.headers["location"] == "/inbox"
        health = await http.get("/health")
        assert health.json() == {"ok": True} and health.headers["content-type"] == "application/json"
        inbox = await http.get("/inbox")
        assert inbox.headers["content-type"] == "text/html; charset=utf-8"

        loaded = re.findall(r"<link rel=stylesheet href='([^']+)'>|<script src='([^']+)'>", inbox.text)
        files = sorted({href or src for href, src in loaded})
        assert files == ["/static/console.css", "/static/inbox.js", "/static/timeline.css"], files
        for path, kind in zip(files, ("text/css", "javascript", "text/css"), strict=True):
            served = await http.get(path)
            assert served.status_code == 200 and kind in served.headers["content-type"], path
            assert served.content, path
        refresh = await http.get("/static/refresh.js")
        assert refresh.status_code == 200 and "data-finished" not in refresh.text and "dataset.finished" in refresh.text


async def test_a_wrong_path_method_or_form_gets_the_consoles_own_error_page_and_changes_nothing(
    console: HypercornApp,
) -> None:
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        missing = await http.get("/static/nope.css")
        assert missing.status_code == 404 and "no page at /static/nope.css" in missing.text
        assert "<title>404 · Stock Replenisher</title>" in missing.text
        slash = await http.get("/inbox/")
        assert slash.status_code == 404 and "no page at /inbox/" in slash.text, "no redirect to a page it is not"
        wrong = await http.post("/inbox")
        assert wrong.status_code == 405 and "POST is not allowed on /inbox" in wrong.text
        assert (
            set(wrong.headers["allow"].split(", ")) == {"GET", "HEAD"} and wrong.headers["cache-control"] == "no-store"
        )
        get_approvals = await http.get("/approvals")
        assert get_approvals.status_code == 405 and "GET is not allowed on /approvals" in get_approvals.text
        not_a_run = await http.get("/skus/SKU-1/runs/one")
        assert not_a_run.status_code == 404 and "no page at /skus/SKU-1/runs/one" in not_a_run.text
        huge = await http.post("/approvals", content=b"note=" + b"x" * 20_000)
        assert huge.status_code == 400 and "the form is too large" in huge.text
        unchosen = await http.post("/approvals", data={"decision": "maybe"})
        assert unchosen.status_code == 400 and "choose Approve or Reject" in unchosen.text
