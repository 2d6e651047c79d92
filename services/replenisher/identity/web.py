"""Sign-in for a Starlette app: the pages, the session, CSRF, and who is asking.

- A session is a signed cookie (`HttpOnly`, `SameSite=Lax`, `Secure` behind https) holding the
  person's id, how and when they signed in, and the session's CSRF token. It ends at sign-out or
  `session_hours` after sign-in, whichever is first. Who the person is and what they may do is read
  from the authority matrix on every request, never from the cookie: a person removed from the
  file, or given another role, is so at their next click.
- Every state-changing request (a POST) must carry the session's CSRF token in its form, and is
  refused when the browser says it comes from another site (`Sec-Fetch-Site: cross-site`) or its
  `Origin` is not the console's.
- Local passwords (argon2) need no identity provider; with OpenID Connect configured, people
  sign in with their company account: the ID token's verified email names the person.
  The provider being down only stops new sign-ins; sessions already open carry on.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.starlette_client import OAuth
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from replenisher.asgi_body import BodyTooLarge, read_body
from replenisher.domain.authority import Action, AuthorityMatrix, Person
from replenisher.identity.passwords import decoy_hash, verify_password
from replenisher.identity.settings import SignInSettings

log = logging.getLogger(__name__)

SESSION_COOKIE = "replenisher_session"
MAX_FORM_BYTES = 8_192
NO_STORE = {"cache-control": "no-store"}

Render = Callable[..., str]
AuditHook = Callable[[str, str, Request, str], Awaitable[None]]
"""(event, person or what they typed, request, result): sign-ins and their failures, for the audit log."""


class SignIn:
    def __init__(
        self,
        settings: SignInSettings,
        matrix: Callable[[], AuthorityMatrix],
        render: Render,
        audit: AuditHook | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._matrix = matrix
        self._render = render
        self._audit = audit or _no_audit
        self._now = now
        decoy_hash()  # made now, so the first unknown person costs what every later one does
        self._oauth: OAuth | None = None
        if settings.oidc is not None:
            self._oauth = OAuth()
            self._oauth.register(
                name="idp",
                client_id=settings.oidc.client_id,
                client_secret=settings.oidc.client_secret.get_secret_value(),
                server_metadata_url=f"{settings.oidc.issuer}/.well-known/openid-configuration",
                client_kwargs={"scope": "openid email", "code_challenge_method": "S256", "timeout": 10.0},
            )

    # --- for the app that mounts it ---------------------------------------------------------------

    def middleware(self) -> list[Middleware]:
        return [
            Middleware(
                SessionMiddleware,
                secret_key=self.settings.session_secret.get_secret_value(),
                session_cookie=SESSION_COOKIE,
                max_age=int(self.settings.session_hours * 3600),
                same_site="lax",  # strict would drop the cookie on the identity provider's redirect back
                https_only=self.settings.secure_cookies,
            )
        ]

    def routes(self) -> list[Route]:
        return [
            Route("/sign-in", self.sign_in_page, methods=["GET"]),
            Route("/sign-in", self.sign_in_with_password, methods=["POST"]),
            Route("/sign-in/oidc", self.sign_in_with_oidc, methods=["GET"]),
            Route("/auth/callback", self.oidc_callback, methods=["GET"]),
            Route("/sign-out", self.sign_out, methods=["POST"]),
        ]

    def person(self, request: Request) -> Person | None:
        """Who is signed in on this request, if anyone (and they are still in the matrix)."""
        session = request.session
        who, at = session.get("person"), session.get("at")
        if not isinstance(who, str) or not isinstance(at, (int, float)):
            return None
        if self._now() - at > self.settings.session_hours * 3600:
            session.clear()
            return None
        return self._matrix().find(who)

    def require(self, request: Request, action: Action) -> Person:
        """The person asking, if they may do `action`; otherwise a sign-in redirect (401 for a POST) or a 403."""
        person = self.person(request)
        if person is None:
            if request.method == "GET":
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                raise HTTPException(303, headers={"location": f"/sign-in?next={quote(target, safe='')}"})
            raise HTTPException(401, "sign in first: this needs a signed-in person")
        if not person.may(action):
            roles = ", ".join(person.roles)
            raise HTTPException(403, f"{person.id} ({roles}) may not {action}: that needs another role")
        return person

    def csrf_token(self, request: Request) -> str:
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = secrets.token_urlsafe(32)
            request.session["csrf"] = token
        return token

    def check_post(self, request: Request, form: Mapping[str, str]) -> None:
        """Refuse a state-changing request that another site could have made (403, nothing changes)."""
        if request.headers.get("sec-fetch-site") == "cross-site":
            raise HTTPException(403, "refused: the form was posted from another site")
        origin = request.headers.get("origin")
        if origin is not None and origin != self.settings.public_url:
            raise HTTPException(403, f"refused: the form was posted from {origin}, not from this console")
        given, expected = form.get("csrf"), request.session.get("csrf")
        if not isinstance(given, str) or not isinstance(expected, str) or not secrets.compare_digest(given, expected):
            raise HTTPException(403, "refused: the form's CSRF token does not match your session; reload the page")

    # --- the pages -----------------------------------------------------------------------------

    async def sign_in_page(self, request: Request) -> Response:
        return self._page(request, safe_next(request.query_params.get("next")))

    async def sign_in_with_password(self, request: Request) -> Response:
        form = await small_form(request)
        self.check_post(request, form)
        typed = form.get("person", "").strip().lower()
        password = form.get("password", "")
        target = safe_next(form.get("next"))
        matrix = self._matrix()
        person = matrix.find(typed) or next((p for p in matrix.people if p.email.lower() == typed), None)
        stored = person.password_hash if person is not None else None
        # The same work whether or not the person exists, so the answer tells nothing about who does.
        right = verify_password(stored or decoy_hash(), password) and stored is not None
        if person is None or not right:
            await self._audit("sign_in_failed", typed[:100], request, "wrong person or password")
            return self._page(request, target, "That person and password do not match.", status=401)
        await self._start(request, person, "password")
        return RedirectResponse(target, 303, headers=NO_STORE)

    async def sign_in_with_oidc(self, request: Request) -> Response:
        if self._oauth is None:
            raise HTTPException(404, "this console has no identity provider configured: sign in with a password")
        request.session["next"] = safe_next(request.query_params.get("next"))
        try:
            return await self._oauth.idp.authorize_redirect(request, self.settings.callback_url)
        except Exception as e:
            log.warning("the identity provider cannot be reached: %r", e)
            return self._page(request, "/", "The identity provider cannot be reached; try again later.", 503)

    async def oidc_callback(self, request: Request) -> Response:
        if self._oauth is None:
            raise HTTPException(404, "this console has no identity provider configured")
        target = safe_next(request.session.pop("next", None))
        try:
            token = await self._oauth.idp.authorize_access_token(request)
            claims: dict[str, Any] = dict(token.get("userinfo") or {})
            if "email" not in claims:
                # Providers that keep the email out of the ID token give it at the userinfo endpoint,
                # for the same subject (OpenID Connect Core 5.3.2): another subject's answer is no answer.
                more = dict(await self._oauth.idp.userinfo(token=token))
                claims |= more if more.get("sub") == claims.get("sub") else {}
        except OAuthError as e:
            refused = f"the identity provider's answer was refused: {e.error}"
            await self._audit("sign_in_failed", "oidc", request, refused)
            return self._page(request, target, "The sign-in could not be completed; try again.", 400)
        except Exception as e:
            log.warning("the identity provider's answer could not be used: %r", e)
            await self._audit("sign_in_failed", "oidc", request, f"the identity provider cannot be reached: {e}")
            return self._page(request, target, "The identity provider cannot be reached; try again later.", 503)
        email = str(claims.get("email") or "").lower()
        if not email or claims.get("email_verified") is False:
            await self._audit("sign_in_failed", email or "oidc", request, "no verified email in the ID token")
            return self._page(request, target, "Your account has no verified email address.", 403)
        person = next((p for p in self._matrix().people if p.email.lower() == email), None)
        if person is None:
            await self._audit("sign_in_failed", email, request, "not one of the people")
            return self._page(request, target, f"{email} is not one of this console's people.", 403)
        await self._start(request, person, "oidc")
        return RedirectResponse(target, 303, headers=NO_STORE)

    async def sign_out(self, request: Request) -> Response:
        form = await small_form(request)
        self.check_post(request, form)
        who = request.session.get("person")
        request.session.clear()
        if isinstance(who, str):
            await self._audit("sign_out", who, request, "signed out")
        return RedirectResponse("/sign-in", 303, headers=NO_STORE)

    # --- helpers -----------------------------------------------------------------------------------

    async def _start(self, request: Request, person: Person, method: str) -> None:
        # A new session, and a new CSRF token: nothing from before sign-in carries over.
        request.session.clear()
        request.session.update({"person": person.id, "at": self._now(), "method": method})
        self.csrf_token(request)
        await self._audit("sign_in", person.id, request, f"signed in ({method})")

    def _page(self, request: Request, target: str, error: str = "", status: int = 200) -> HTMLResponse:
        body = self._render(
            "sign_in.html",
            csrf=self.csrf_token(request),
            next=target,
            error=error,
            oidc_label=self.settings.oidc.label if self.settings.oidc else None,
        )
        return HTMLResponse(body, status, headers=NO_STORE)


async def _no_audit(event: str, who: str, request: Request, result: str) -> None:
    return None


def safe_next(target: str | None) -> str:
    """Only a path on this console: never another site (`//evil.example`, `https://...`)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else "/"


async def small_form(request: Request) -> dict[str, str]:
    """A posted form's fields (the last value of a repeated one); 413 above MAX_FORM_BYTES."""
    try:
        body = await read_body(request.receive, MAX_FORM_BYTES) or b""
    except BodyTooLarge as e:
        raise HTTPException(413, f"the form is larger than {MAX_FORM_BYTES} bytes") from e
    return {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
