"""Signing in to the console: local passwords, a real OpenID provider, sessions, CSRF and roles.

Through real processes: the app behind the sign-in under hypercorn, oidc-provider under node,
spoken to over HTTP as a browser would (cookies kept per client). The audit lines are the app's
record of each sign-in and failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

from people.accounts import PASSWORDS
from people.conftest import SignedApp, start_app
from people.provider import OidcProvider
from support import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def browser(signed_app: SignedApp) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=signed_app.url, follow_redirects=False, timeout=15) as client:
        yield client


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r"name=csrf value='([^']+)'", page.text)
    assert found, page.text
    return found.group(1)


def sign_in(client: httpx.Client, who: str, password: str, target: str = "/whoami") -> httpx.Response:
    page = client.get("/sign-in", params={"next": target})
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    return client.post("/sign-in", data={"csrf": csrf_of(page), "person": who, "password": password, "next": target})


def whoami(client: httpx.Client) -> httpx.Response:
    return client.get("/whoami")


def oidc_sign_in(client: httpx.Client, provider: OidcProvider, login: str) -> httpx.Response:
    """The browser's walk: to the provider, its login and consent forms, and back to the console's callback."""
    response = client.get("/sign-in/oidc", params={"next": "/whoami"})
    for _ in range(20):
        if response.status_code in (302, 303):
            location = urljoin(str(response.url), response.headers["location"])
            if location.startswith(f"{client.base_url}/auth/callback"):
                return client.get(location)
            response = client.get(location)
            continue
        assert response.status_code == 200, (response.status_code, response.text[:500])
        action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
        assert action, response.text[:500]
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', response.text))
        if fields.get("prompt") == "login":
            fields |= {"login": login, "password": "the provider's dev form takes any"}
        response = client.post(urljoin(str(response.url), action.group(1)), data=fields)
    raise AssertionError("the sign-in never came back to the console")


# --- local passwords ---------------------------------------------------------------------------------


def test_a_person_signs_in_with_a_password_and_the_session_cookie_is_locked_down(
    browser: httpx.Client, signed_app: SignedApp
) -> None:
    answer = sign_in(browser, "ana", PASSWORDS["ana"])
    assert answer.status_code == 303 and answer.headers["location"] == "/whoami"
    cookie = next(h for h in answer.headers.get_list("set-cookie") if h.startswith("replenisher_session="))
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert "httponly" in flags and "samesite=lax" in flags, cookie
    assert any(f.startswith("max-age=") for f in flags), cookie
    me = whoami(browser)
    assert me.status_code == 200 and me.json()["person"] == "ana"
    assert signed_app.audit()[-1] == {
        "event": "sign_in",
        "who": "ana",
        "from": "127.0.0.1",
        "result": "signed in (password)",
    }
    # The id or the email, any case.
    with httpx.Client(base_url=signed_app.url, timeout=15) as other:
        assert sign_in(other, "ANA@plant.example", PASSWORDS["ana"]).status_code == 303
        assert whoami(other).json()["person"] == "ana"


def test_a_wrong_password_and_an_unknown_person_get_the_same_answer_and_no_session(
    browser: httpx.Client, signed_app: SignedApp
) -> None:
    wrong = sign_in(browser, "ana", "not ana's passphrase")
    unknown = sign_in(browser, "mallory", PASSWORDS["ana"])
    no_password = sign_in(browser, "paul", "paul has only his company account")
    for answer in (wrong, unknown, no_password):
        assert answer.status_code == 401
        assert "That person and password do not match." in answer.text
    assert whoami(browser).status_code == 303
    failures = [line for line in signed_app.audit() if line["event"] == "sign_in_failed"]
    assert [line["who"] for line in failures[-3:]] == ["ana", "mallory", "paul"]


def test_without_a_session_a_page_sends_to_sign_in_and_a_post_is_refused(browser: httpx.Client) -> None:
    page = browser.get("/whoami", params={"x": "1"})
    assert page.status_code == 303 and page.headers["location"] == "/sign-in?next=%2Fwhoami%3Fx%3D1"
    post = browser.post("/approve", data={"po_number": "PO-1"})
    assert post.status_code == 401 and "sign in first" in post.text


def test_sign_out_ends_the_session(browser: httpx.Client, signed_app: SignedApp) -> None:
    sign_in(browser, "ana", PASSWORDS["ana"])
    token = whoami(browser).json()["csrf"]
    refused = browser.post("/sign-out", data={"csrf": "forged"})
    assert refused.status_code == 403 and whoami(browser).status_code == 200  # the control: still in
    out = browser.post("/sign-out", data={"csrf": token})
    assert out.status_code == 303 and out.headers["location"] == "/sign-in"
    assert whoami(browser).status_code == 303
    assert signed_app.audit()[-1]["event"] == "sign_out"


def test_a_session_ends_when_its_hours_are_up(tmp_path: Path, log_dir: Path) -> None:
    short = start_app(tmp_path, log_dir, session_hours=3 / 3600)  # three seconds
    try:
        with httpx.Client(base_url=short.url, timeout=15) as client:
            sign_in(client, "ana", PASSWORDS["ana"])
            assert whoami(client).status_code == 200  # the control: signed in

            async def expired() -> bool:
                return whoami(client).status_code == 303

            import asyncio

            asyncio.run(eventually(expired, timeout=30, what="the session to expire"))
    finally:
        short.process.stop()


def test_the_next_page_after_sign_in_is_never_another_site(browser: httpx.Client) -> None:
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
        answer = sign_in(browser, "ana", PASSWORDS["ana"], target=target)
        assert answer.status_code == 303 and answer.headers["location"] == "/", target


# --- CSRF and roles ----------------------------------------------------------------------------------


def test_a_cross_site_post_is_refused_and_a_same_site_one_with_the_token_goes_through(
    browser: httpx.Client, signed_app: SignedApp
) -> None:
    sign_in(browser, "ana", PASSWORDS["ana"])
    token = whoami(browser).json()["csrf"]
    form = {"po_number": "PO-7", "csrf": token}
    cases = [
        ({}, {"po_number": "PO-7"}, "CSRF token does not match"),
        ({}, {**form, "csrf": "guessed"}, "CSRF token does not match"),
        ({"origin": "https://evil.example"}, form, "posted from https://evil.example"),
        ({"sec-fetch-site": "cross-site"}, form, "posted from another site"),
    ]
    for headers, data, says in cases:
        refused = browser.post("/approve", data=data, headers=headers)
        assert refused.status_code == 403 and says in refused.text, (headers, refused.text)
    same_site = browser.post("/approve", data=form, headers={"origin": signed_app.url, "sec-fetch-site": "same-origin"})
    assert same_site.status_code == 200 and same_site.json() == {"approved_by": "ana", "po_number": "PO-7"}
    # A token from another session is no token: each session has its own.
    with httpx.Client(base_url=signed_app.url, timeout=15) as other:
        sign_in(other, "ana", PASSWORDS["ana"])
        assert other.post("/approve", data=form).status_code == 403


def test_a_viewer_sees_but_cannot_approve(signed_app: SignedApp) -> None:
    with httpx.Client(base_url=signed_app.url, timeout=15) as vic:
        sign_in(vic, "vic", PASSWORDS["vic"])
        me = whoami(vic)
        assert me.status_code == 200 and me.json()["roles"] == ["viewer"]
        refused = vic.post("/approve", data={"po_number": "PO-8", "csrf": me.json()["csrf"]})
        assert refused.status_code == 403 and refused.text == "vic (viewer) may not approve: that needs another role"


def test_an_edited_matrix_takes_effect_at_the_next_click_and_a_broken_edit_changes_nothing(
    tmp_path: Path, log_dir: Path
) -> None:
    app = start_app(tmp_path, log_dir)
    try:
        with httpx.Client(base_url=app.url, timeout=15) as ana:
            sign_in(ana, "ana", PASSWORDS["ana"])
            token = whoami(ana).json()["csrf"]
            assert ana.post("/approve", data={"csrf": token}).status_code == 200
            good = app.people_file.read_text()
            # A half-saved file: the last good matrix stays in force.
            app.people_file.write_text(good.replace("limit = 1000", 'limit = "lots"'))
            assert ana.post("/approve", data={"csrf": token}).status_code == 200
            assert "limit: must be a number, got 'lots'" in app.process.log_tail()
            # Ana made a viewer: her open session loses the approval at once.
            app.people_file.write_text(good.replace('roles = ["approver"]\nlimit = 1000', 'roles = ["viewer"]', 1))
            refused = ana.post("/approve", data={"csrf": token})
            assert refused.status_code == 403 and "ana (viewer)" in refused.text
    finally:
        app.process.stop()


# --- OpenID Connect --------------------------------------------------------------------------------------


def test_a_person_signs_in_with_the_company_account(provider: OidcProvider, signed_app: SignedApp) -> None:
    with httpx.Client(base_url=signed_app.url, timeout=15) as paul:
        back = oidc_sign_in(paul, provider, "paul")
        assert back.status_code == 303 and back.headers["location"] == "/whoami", back.text
        assert whoami(paul).json()["person"] == "paul"
    assert signed_app.audit()[-1]["result"] == "signed in (oidc)"


def test_a_company_account_that_is_not_one_of_the_people_is_refused(
    provider: OidcProvider, signed_app: SignedApp
) -> None:
    for login, says in (("zed", "zed@plant.example is not one of"), ("unverified-ana@plant.example", "no verified")):
        with httpx.Client(base_url=signed_app.url, timeout=15) as stranger:
            back = oidc_sign_in(stranger, provider, login)
            assert back.status_code == 403 and says in back.text, back.text
            assert whoami(stranger).status_code == 303


def test_with_the_provider_down_no_one_new_gets_in_and_open_sessions_carry_on(
    provider: OidcProvider, signed_app: SignedApp
) -> None:
    with (
        httpx.Client(base_url=signed_app.url, timeout=15) as paul,
        httpx.Client(base_url=signed_app.url, timeout=15) as late,
    ):
        assert oidc_sign_in(paul, provider, "paul").status_code == 303
        first = late.get("/sign-in/oidc", params={"next": "/whoami"})  # sent to the provider ...
        provider.stop()
        try:
            assert first.status_code == 302
            # ... which no longer answers: a forged return with a made-up code changes nothing.
            state = re.search(r"state=([^&]+)", first.headers["location"])
            assert state
            back = late.get("/auth/callback", params={"code": "made-up", "state": state.group(1)})
            assert back.status_code == 503 and "cannot be reached" in back.text, back.text
            assert whoami(late).status_code == 303
            assert signed_app.audit()[-1]["event"] == "sign_in_failed"
            assert whoami(paul).json()["person"] == "paul"
        finally:
            provider.start()
            provider.wait_ready()
