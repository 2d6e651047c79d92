"""`replenisher` as a person uses it, in a child process, against the real stack."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path

import httpx
import pytest
from operator_support import Cli, setup_lasting_quotes

from e2e.scenario import JSON, Scenario, ok
from replenisher.stack.admin import Admin
from replenisher.stack.ports import free_port
from replenisher.stack.runtime import RestateRuntime
from support import RegisteredService, eventually

pytestmark = pytest.mark.e2e

DAILY = ["skus", "status", "approve", "reject", "deliver", "timeline", "outcomes", "cost", "console", "up", "down"]


async def test_help_lists_the_commands(cli: Cli) -> None:
    result = await cli("--help")
    assert result.code == 0, result
    for command in DAILY:
        assert f"\n    {command} " in result.out or f"\n  {command} " in result.out, f"{command} missing:\n{result}"


@pytest.mark.slow
async def test_status_shows_the_token_and_approving_carries_the_run_to_its_goods(cli: Cli, scenario: Scenario) -> None:
    await setup_lasting_quotes(scenario, price=4.0)
    await scenario.configure(reply_after_chase=300)  # a wait this run never reaches: shown, changes nothing
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    status = await cli("status", scenario.sku)
    assert status.code == 0, status
    assert "own waits (days): reply after chase 300" in status.out and "remembers: nothing yet" in status.out, status
    assert f"approval pending: {request['po_number']}" in status.out
    assert f"approval token: {request['token']}" in status.out, status
    assert f"replenisher approve {scenario.sku} --up-to 4.00" in status.out

    skus = await cli("skus", "--search", scenario.sku)  # its own row: other tests' agents may fill the first page
    row = next(line for line in skus.out.splitlines() if line.startswith(scenario.sku))
    assert run_id in row and "wait_for_approval" in row, skus

    # A guessed token that does reach the run is refused there, and `status` says so.
    guess = {"po_number": request["po_number"], "token": "guess", "approved": True, "up_to": 4.0}
    ok(await scenario.deliver("approval", guess))

    async def refused_seen() -> bool:
        return (await scenario.status())["security"]["total"] >= 1

    await eventually(refused_seen, timeout=30, what="the run to refuse the guessed token")
    shown = await cli("status", scenario.sku)
    assert "security events: 1 (refused, nothing changed" in shown.out and run_id in shown.out, shown
    assert "approval pending" in shown.out, "the refused approval changed nothing"

    approved = await cli("approve", scenario.sku, "--up-to", "4.20", "--token", request["token"], "--note", "ok")
    assert approved.code == 0, approved
    assert f"{request['po_number']} approved up to 4.20: delivered to {run_id}" in approved.out
    assert "read it and carried on:" in approved.out and "wait_for_approval: approved up to 4.20" in approved.out

    outcome = await scenario.outcome(run_id)
    assert outcome["outcome"] == "received"
    outcomes = await cli("outcomes", scenario.sku, "--json")
    assert [(o["run_id"], o["outcome"]) for o in json.loads(outcomes.out)] == [(run_id, "received")]

    async def remembered() -> str | None:
        shown = (await cli("status", scenario.sku)).out
        return shown if "remembers (1 finished run):" in shown else None

    memory = await eventually(remembered, timeout=30, what="status to show what the finished run taught the SKU")
    assert f"  {scenario.supplier}: reliability " in memory and " of 1 orders on time" in memory, memory
    assert "last price 4.00" in memory, memory

    assert f"{scenario.sku}: not watched · 1 run started · outcomes: received 1" in memory, memory
    skus = await cli("skus", "--search", scenario.sku)  # its own row: other tests' agents may fill the first page
    row = next(line for line in skus.out.splitlines() if line.startswith(scenario.sku))
    assert "run 1 received: " in row, skus  # the run's number, not read as a count

    again = await cli("approve", scenario.sku, "--up-to", "4.20")
    assert again.code == 1 and "no replenishment running" in again.err, again

    cost = await cli("cost", scenario.sku, "--json")
    [row_cost] = json.loads(cost.out)
    assert row_cost["bought"] == pytest.approx(95 * 4.0) and row_cost["model"]["calls"] == 0


async def test_approving_below_the_asked_price_or_with_a_wrong_token_decides_nothing(
    cli: Cli, scenario: Scenario
) -> None:
    """Apart from the test above, so its approval comes well within the quote's year (91 s on the
    test clock) however slow each CLI call is on a loaded machine: here nothing is approved."""
    await setup_lasting_quotes(scenario, price=4.0)
    run_id = (await scenario.check())["started"]
    await scenario.pending_approval()
    too_low = await cli("approve", scenario.sku, "--up-to", "3.50")
    assert too_low.code == 1 and "below the asked 4.00" in too_low.err, too_low
    for nonsense in ("-5", "0", "nan", "inf"):
        refused = await cli("approve", scenario.sku, f"--up-to={nonsense}")
        assert refused.code == 1 and "is no unit price" in refused.err, refused
    wrong_token = await cli("approve", scenario.sku, "--up-to", "4.00", "--token", "not-the-token")
    assert wrong_token.code == 1 and "not the one of" in wrong_token.err, wrong_token
    assert [r["status"] for r in await scenario.approval_requests()] == ["pending"], "nothing was decided"
    view = await scenario.run_view(run_id)
    assert view["waiting"]["tool"] == "wait_for_approval" and view["state"]["security"]["total"] == 0, view
    # The control: the same CLI with the right price and token does decide.
    approved = await cli("approve", scenario.sku, "--up-to", "4.00")
    assert approved.code == 0 and "approved up to 4.00" in approved.out, approved


async def test_reject_ends_the_run_rejected_without_an_order(cli: Cli, scenario: Scenario) -> None:
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    await scenario.pending_approval()

    rejected = await cli("reject", scenario.sku, "--note", "too dear", "--json")
    assert rejected.code == 0, rejected
    body = json.loads(rejected.out)
    assert body["decided"]["approved"] is False and body["run_state"]["rejected"] is True

    assert (await scenario.outcome(run_id))["outcome"] == "rejected"
    assert await scenario.orders() == []


async def test_a_kept_message_says_who_sent_it_an_operator_on_the_ingress(cli: Cli, scenario: Scenario) -> None:
    await scenario.setup(on_hand=50, safety_stock=20)
    assert (await scenario.check())["started"] is None
    reply = {"po_number": "PO-OLD-7", "supplier": scenario.supplier, "text": "Your order shipped."}
    delivered = await cli("deliver", scenario.sku, "supplier-reply", json.dumps(reply))
    assert delivered.code == 0 and "kept" in delivered.out, delivered

    as_json = await cli("status", scenario.sku, "--json")
    kept = json.loads(as_json.out)["record"]["kept"]
    assert [(m["event"], m["sender"]) for m in kept] == [("supplier-reply", {"party": "operator"})], kept
    status = await cli("status", scenario.sku)
    assert "supplier-reply from operator at " in status.out, status


# About fifteen CLI processes: 32 s in CI, past the suite's 180 s when the machine is loaded.
@pytest.mark.timeout(360)
@pytest.mark.slow
async def test_errors_are_one_clear_line_and_a_non_zero_exit(
    cli: Cli, scenario: Scenario, tmp_path: Path, operator_env: dict[str, str]
) -> None:
    unknown = await cli("status", "SKU-nobody-knows")
    assert unknown.code == 1 and "unknown SKU SKU-nobody-knows" in unknown.err, unknown
    assert "check or watch starts one, if the ERP stocks the SKU" in unknown.err, unknown
    assert unknown.out == "" and "Traceback" not in unknown.err

    bad = await cli("timeline", "no spaces allowed")
    assert bad.code == 1 and "not a valid SKU" in bad.err, bad

    down = await cli("skus", env={"REPLENISHER_ADMIN_URL": f"http://127.0.0.1:{free_port()}"})
    assert down.code == 3 and "Restate is unreachable: cannot reach its admin API" in down.err, down
    down = await cli("status", "SKU-1", env={"REPLENISHER_INGRESS_URL": f"http://127.0.0.1:{free_port()}"})
    assert down.code == 3 and "Restate is unreachable: cannot reach its ingress" in down.err, down
    # An address without its scheme is named as such, not reported as a stack that is down.
    for env, value in (("REPLENISHER_INGRESS_URL", "localhost:8080"), ("REPLENISHER_ADMIN_URL", "ftp://x")):
        typo = await cli("skus", env={env: value})
        assert typo.code == 2 and typo.out == "", typo
        assert typo.err.strip() == f"error: {env} {value!r} is not a URL: it must start with http:// or https://"
    flag = await cli("skus", "--admin-url", "127.0.0.1:9070")
    assert flag.code == 2 and "--admin-url '127.0.0.1:9070' is not a URL" in flag.err, flag

    await scenario.setup(on_hand=50, safety_stock=20)
    assert (await scenario.check())["started"] is None
    not_json = await cli("deliver", scenario.sku, "goods", "{not json")
    assert not_json.code == 1 and "not valid JSON" in not_json.err, not_json
    refused = await cli("deliver", scenario.sku, "goods", '{"receipt_id": "r1"}')
    assert refused.code == 1 and "bad request: payload for 'goods'" in refused.err and "po_number" in refused.err
    # Checked before anything is sent: with Restate (or the service) away, a bad message is not
    # accepted to fail later where nobody reads it.
    away = {"REPLENISHER_INGRESS_URL": f"http://127.0.0.1:{free_port()}"}
    negative = await cli("deliver", scenario.sku, "goods", '{"receipt_id": "r1", "po_number": "P", "sku": "S", '
                         '"quantity": -5}', env=away)  # fmt: skip
    assert negative.code == 1 and "quantity" in negative.err and "unreachable" not in negative.err, negative
    nothing = await cli("reject", scenario.sku)
    assert nothing.code == 1 and "nothing waits for approval" in nothing.err, nothing

    # These were tracebacks: a file in a folder that does not exist, a console port in use,
    # and a reader that goes away (`replenisher skus | head -1`).
    nowhere = await cli("timeline", scenario.sku, "--html", str(tmp_path / "no-such-folder" / "t.html"))
    assert nowhere.code == 1 and "cannot write" in nowhere.err and "no-such-folder" in nowhere.err, nowhere
    assert "Traceback" not in nowhere.err
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        busy = await cli("console", "--port", str(port), timeout=20)
    assert busy.code == 1 and f"cannot serve the console on 127.0.0.1:{port}" in busy.err, busy
    assert "Traceback" not in busy.err and "console on http" not in busy.out
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the first write fails with EPIPE
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "replenisher.cli", "skus",
            env={**os.environ, **operator_env}, stdout=write_end, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err


async def test_timeline_of_a_finished_run_in_text_json_and_html(cli: Cli, scenario: Scenario, tmp_path) -> None:
    await setup_lasting_quotes(scenario)
    await scenario.fault(down_calls=1)  # the first quote request fails: a retried step
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True, up_to=4.0)
    await scenario.outcome(run_id)

    page = tmp_path / "run.html"
    text = await cli("timeline", scenario.sku, "--html", str(page), "--width", "130")
    assert text.code == 0, text
    assert f"{run_id}  ({scenario.sku})  ended received" in text.out
    for tool in ("get_quotes", "wait_for_approval", "place_order", "wait_for_goods", "close_purchase_order"):
        assert tool in text.out, text.out
    assert f"get_quotes retried after: Unavailable: supplier {scenario.supplier} answered 503" in text.out, text.out
    assert "◆" in text.out, "the approval wait ended by a message"
    assert "<svg" in page.read_text() and "data-outcome='received'" in page.read_text()
    # The retry ended well: drawn as history (amber), not as a failure (red).
    assert "<div class=recovered>get_quotes retried after: Unavailable: supplier" in page.read_text()
    assert "then it succeeded</div>" in page.read_text() and "<div class=err>" not in page.read_text()

    as_json = json.loads((await cli("timeline", scenario.sku, "--run", "1", "--json")).out)
    assert as_json["source"] == "journal" and as_json["outcome"]["outcome"] == "received"
    waits = [t for t in as_json["turns"] if t["tool"] == "wait_for_approval"]
    assert waits[0]["spans"][-1]["ended_by"] == "message"

    missing = await cli("timeline", scenario.sku, "--run", "2")
    assert missing.code == 1 and "has had only 1 run: no run 2" in missing.err, missing


async def test_a_service_crash_during_a_wait_shows_as_a_band_and_the_run_carries_on(
    cli: Cli, scenario: Scenario, service: RegisteredService, ingress: httpx.AsyncClient, admin: Admin
) -> None:
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    service.kill()
    decision = {"po_number": request["po_number"], "token": request["token"], "approved": True, "up_to": 4.0}
    sent = await ingress.post(f"/SkuAgent/{scenario.sku}/deliver/send", json={"event": "approval", "payload": decision})
    assert sent.status_code == 202, sent.text

    async def refused_while_down() -> bool:
        rows = await admin.asql(
            "SELECT e.event_json FROM sys_journal_events e JOIN sys_invocation i ON e.id = i.id "
            f"WHERE i.target = 'SkuAgent/{scenario.sku}/deliver'"
        )
        return any("onnection refused" in r["event_json"] for r in rows)

    await eventually(refused_while_down, timeout=20, what="Restate to record a failed attempt")
    service.restart()
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"

    result = await cli("timeline", scenario.sku, "--json")
    timeline = json.loads(result.out)
    assert timeline["bands"], result
    band = timeline["bands"][0]
    assert band["end"] is not None and band["start"] < band["end"]
    assert any("onnection refused" in e for e in band["errors"])
    text = await cli("timeline", scenario.sku, "--width", "140")
    assert "service down" in text.out and "░" in text.out


async def test_when_restate_has_dropped_the_journal_the_timeline_says_so_and_shows_what_is_kept(
    cli: Cli, scenario: Scenario, restate_runtime: RestateRuntime, admin: Admin
) -> None:
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=False)
    await scenario.outcome(run_id)
    [row] = await admin.asql(f"SELECT id FROM sys_invocation WHERE target = 'Replenish/{run_id}/run'")

    # What retention does after a day, now: first Restate drops the journal...
    async with httpx.AsyncClient(base_url=restate_runtime.admin_url, timeout=30) as client:
        dropped = await client.patch(f"/invocations/{row['id']}/purge-journal")
        assert dropped.is_success, dropped.text
        assert await admin.asql(f"SELECT index FROM sys_journal WHERE id = '{row['id']}'") == []

        result = await cli("timeline", scenario.sku, "--width", "200")
        assert result.code == 0, result
        assert "no longer holds this run's journal" in result.out
        assert "from the run's own history (no times)" in result.out
        assert "wait_for_approval" in result.out and "the manager rejected" in result.out

        # ... then the whole invocation, with the workflow's state.
        purged = await client.patch(f"/invocations/{row['id']}/purge")
        assert purged.is_success, purged.text

    # The run was started, so its address still answers, empty (not a 404 as for a run never started).
    assert await scenario.run_view(run_id) == {"state": None, "waiting": None}
    result = await cli("timeline", scenario.sku, "--width", "200")
    assert result.code == 0, result
    assert "from the outcome kept in the SKU's record" in result.out
    assert "only the outcome kept in the SKU's record remains" in result.out
    assert "outcome: REJECTED" in result.out


async def test_on_the_last_approval_round_an_expired_quote_cannot_be_sent_for_fresh_quotes(
    cli: Cli, scenario: Scenario
) -> None:
    """The CLI said "sent back for fresh quotes" on the run's third and last round, and the run
    then gave up: now that approval is refused with the reason, and reject ends the run."""
    await scenario.setup(quote_valid_days=12)  # 3 s: time to draft and ask
    run_id = (await scenario.check())["started"]
    seen: list[str] = []
    for round_number in (1, 2, 3):

        async def next_request() -> JSON | None:
            for entry in await scenario.approval_requests():
                if entry["status"] == "pending" and entry["request"]["po_number"] not in seen:
                    return entry["request"]
            return None

        request = await eventually(next_request, timeout=30, what=f"approval request {round_number}")
        seen.append(request["po_number"])

        async def expired(request: JSON = request) -> bool:
            return ok(await scenario.world.get("/admin/clock"))["now"] > request["expires_at"]

        await eventually(expired, timeout=10, what="its quote to expire")
        answer = await cli("approve", scenario.sku, "--up-to", f"{request['unit_price']:.2f}", "--no-wait")
        if round_number < 3:
            assert answer.code == 0 and "sent back for fresh quotes" in answer.out, answer  # the control
    assert answer.code == 1 and "cannot get fresh quotes, so approving orders nothing" in answer.err, answer
    assert (await scenario.run_view(run_id))["state"]["approval"]["status"] == "pending", "nothing was sent"
    rejected = await cli("reject", scenario.sku, "--no-wait")
    assert rejected.code == 0, rejected
    assert (await scenario.outcome(run_id, within=30))["outcome"] == "rejected"
    assert await scenario.orders() == [], "nothing was ordered (the world's records)"


async def test_approving_an_expired_quote_sends_the_run_for_fresh_quotes(cli: Cli, scenario: Scenario) -> None:
    """A request whose quote expired can be ordered on by nobody: refusing the approval (as the
    CLI and console did) left the manager only Reject, or a run waiting out its window. The
    approval now sends the run for fresh quotes; judged by the world's requests and orders."""
    await scenario.setup(quote_valid_days=12)  # 3 s: time to draft and ask
    run_id = (await scenario.check())["started"]
    first = await scenario.pending_approval()

    async def quote_expired() -> bool:
        return ok(await scenario.world.get("/admin/clock"))["now"] > first["expires_at"]

    await eventually(quote_expired, timeout=10, what="the quote behind the request to expire")
    sent_back = await cli("approve", scenario.sku, "--up-to", f"{first['unit_price']:.2f}")
    assert sent_back.code == 0 and "sent back for fresh quotes" in sent_back.out, sent_back

    async def approve_new_requests() -> list[JSON]:
        for entry in await scenario.approval_requests():
            if entry["status"] == "pending" and entry["request"]["po_number"] != first["po_number"]:
                await scenario.decide(entry["request"]["po_number"], approved=True)
        return await scenario.orders()

    orders = await eventually(approve_new_requests, timeout=60, what="an order on fresh quotes")
    outcome = await scenario.outcome(run_id, within=60)
    assert outcome["outcome"] == "received"
    assert len(orders) == 1 and orders[0]["po_number"] != first["po_number"], "nothing was ordered on the old quote"
    history = (await scenario.run_view(run_id))["state"]["history"]
    assert [t["tool"] for t in history].count("get_quotes") >= 2
