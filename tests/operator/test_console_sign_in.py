"""The console with people signed in, through the real stack: three people at once, each with
their own session. Judged from the world's orders and the manager's inbox, and from the day's
audit log read back through Restate.

A buyer whose limit is below the order cannot approve it and is told who can; a viewer sees the
inbox without decision forms and cannot post one; a cross-site post is refused; the plant
manager's approval orders.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest
from operator_support import setup_lasting_quotes

from e2e.scenario import Scenario
from people.accounts import PASSWORDS
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import RestateRuntime
from support import audit_entries_since, eventually

pytestmark = pytest.mark.timeout(240)


async def signed_in(console: HypercornApp, who: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=console.url, timeout=30)
    page = await client.get("/sign-in")
    csrf = re.search(r"name=csrf value='([^']+)'", page.text)
    assert csrf, page.text
    answer = await client.post(
        "/sign-in", data={"csrf": csrf.group(1), "person": who, "password": PASSWORDS[who], "next": "/inbox"}
    )
    assert answer.status_code == 303, answer.text
    return client


def form_fields(page: str, po_number: str) -> dict[str, str]:
    """The decision form of `po_number`'s card, as the browser would post it."""
    card = page[page.index(po_number) :]
    form = card[card.index("<form class=decide") : card.index("</form>")]
    return dict(re.findall(r"<input type=hidden name=(\w+) value='([^']*)'>", form))


async def test_three_people_at_once_each_may_do_only_what_the_matrix_gives_them(
    signed_console: HypercornApp, scenario: Scenario, restate_runtime: RestateRuntime
) -> None:
    started = time.time()
    await setup_lasting_quotes(scenario, price=20.0)  # 95 x 20.00 = 1,900: above Ana's 1,000
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    po = request["po_number"]

    # Nobody signed in: the inbox sends to the sign-in page, and a decision is refused.
    async with httpx.AsyncClient(base_url=signed_console.url, timeout=30) as stranger:
        page = await stranger.get("/inbox")
        assert page.status_code == 303 and page.headers["location"].startswith("/sign-in?next=")
        blind = await stranger.post(
            "/approvals", data={"sku": scenario.sku, "token": request["token"], "decision": "approve"}
        )
        assert blind.status_code == 401

    ana, vic, paul = [await signed_in(signed_console, who) for who in ("ana", "vic", "paul")]
    try:
        # Ana, a buyer: her form is there, and her approval is refused with who can give it.
        inbox = await ana.get("/inbox")
        assert inbox.status_code == 200 and "Ana Lindqvist" in inbox.text and "Sign out" in inbox.text
        assert "You cannot approve this: the order&#39;s total 1,900.00 is above ana&#39;s limit" in inbox.text
        fields = form_fields(inbox.text, po)
        assert fields["token"] == request["token"] and fields["csrf"]
        refused = await ana.post("/approvals", data={**fields, "decision": "approve", "confirmed": "yes"})
        assert refused.status_code == 403, refused.text
        assert "above ana&#39;s limit of 1,000.00; it can be approved by paul" in refused.text

        # Vic, a viewer: the inbox without a decision form (nor the token), and a post refused.
        seen = await vic.get("/inbox")
        assert seen.status_code == 200 and po in seen.text
        assert "Only an approver can decide this request." in seen.text and request["token"] not in seen.text
        vic_csrf = re.search(r"name=csrf value='([^']+)'", seen.text)
        assert vic_csrf  # the sign-out form's
        posted = await vic.post("/approvals", data={**fields, "csrf": vic_csrf.group(1), "decision": "approve"})
        assert posted.status_code == 403 and "vic (viewer) may not approve" in posted.text

        # Paul, the plant manager: a post from another site, or with Ana's session token, is refused ...
        mine = form_fields((await paul.get("/inbox")).text, po)
        assert mine["csrf"] != fields["csrf"], "each session has its own CSRF token"
        forged = await paul.post(
            "/approvals", data={**mine, "decision": "approve"}, headers={"origin": "https://evil.example"}
        )
        assert forged.status_code == 403 and "posted from https://evil.example" in forged.text
        borrowed = await paul.post("/approvals", data={**mine, "csrf": fields["csrf"], "decision": "approve"})
        assert borrowed.status_code == 403 and "CSRF token does not match" in borrowed.text
        assert await scenario.orders() == [], "nothing refused so far ordered anything"
        assert [r["status"] for r in await scenario.approval_requests()] == ["pending"]

        # ... and his own approval, confirmed above the console's confirmation amount, orders.
        confirm = await paul.post("/approvals", data={**mine, "decision": "approve"})
        assert confirm.status_code == 200 and "Confirm: approve" in confirm.text
        form = confirm.text[confirm.text.index("<div class='card confirm'") :]
        second = dict(re.findall(r"<input type=hidden name=(\w+) value='?([^'>]*)'?>", form))
        assert second["confirmed"] == "yes" and second["csrf"] == mine["csrf"]
        done = await paul.post("/approvals", data={**second, "decision": "approve"})
        assert done.status_code == 303, done.text

        async def ordered() -> list[dict[str, object]] | None:
            return await scenario.orders() or None

        orders = await eventually(ordered, timeout=60, what="the plant manager's approval to order")
        assert [o["po_number"] for o in orders] == [po]
        view = await scenario.run_view(run_id)
        assert view["state"]["approval"]["decided_by"] == "paul (console)"

        # Signing out ends Paul's session; Ana's goes on.
        out = await paul.post("/sign-out", data={"csrf": mine["csrf"]})
        assert out.status_code == 303 and (await paul.get("/inbox")).status_code == 303
        assert (await ana.get("/inbox")).status_code == 200
    finally:
        for client in (ana, vic, paul):
            await client.aclose()

    # The day's audit log holds the sign-ins, Ana's refused approval and Paul's sign-out.
    async with httpx.AsyncClient() as client:

        async def logged() -> list[tuple[str, str, str]] | None:
            read = await audit_entries_since(restate_runtime.ingress_url, started, client=client)
            mine = [(e.event, e.who, e.outcome) for e in read if e.what in (po,) or e.event != "approval_refused"]
            wanted = {("sign_in", "ana", "done"), ("sign_in", "vic", "done"), ("approval_refused", "ana", "refused")}
            return mine if wanted <= set(mine) and ("sign_out", "paul", "done") in mine else None

        entries = await eventually(logged, timeout=60, what="the sign-ins and the refusal in the audit log")
        assert ("sign_in", "paul", "done") in entries
