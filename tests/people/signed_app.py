"""A small app behind the console's sign-in, served by hypercorn for the sign-in tests: the sign-in
pages, a page any signed-in person may read, and a form only an approver may post. Configured by
environment variables, which the tests set."""

from __future__ import annotations

import json
import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from replenisher.adapters.people_file import MatrixFile
from replenisher.identity.settings import OidcSettings, SignInSettings
from replenisher.identity.web import SignIn, small_form
from replenisher.templating import render

env = os.environ
settings = SignInSettings(
    people_file=Path(env["PEOPLE_FILE"]),
    session_secret=env["SESSION_SECRET"],
    public_url=env["PUBLIC_URL"],
    session_hours=float(env.get("SESSION_HOURS", "8")),
    oidc=OidcSettings(issuer=env["OIDC_ISSUER"], client_id=env["OIDC_CLIENT_ID"], client_secret=env["OIDC_SECRET"])
    if env.get("OIDC_ISSUER")
    else None,
)
people = MatrixFile(settings.people_file)
AUDIT = Path(env["AUDIT_FILE"])


async def audit(event: str, who: str, request: Request, result: str) -> None:
    client = request.client.host if request.client else ""
    line = json.dumps({"event": event, "who": who, "from": client, "result": result}) + "\n"
    with AUDIT.open("a") as f:  # noqa: ASYNC230 - one short line, in a test app
        f.write(line)


sign_in = SignIn(settings, people.current, render, audit)


async def health(request: Request) -> Response:
    return PlainTextResponse("ok")


async def whoami(request: Request) -> Response:
    person = sign_in.require(request, "view")
    return JSONResponse({"person": person.id, "roles": list(person.roles), "csrf": sign_in.csrf_token(request)})


async def approve(request: Request) -> Response:
    person = sign_in.require(request, "approve")
    form = await small_form(request)
    sign_in.check_post(request, form)
    return JSONResponse({"approved_by": person.id, "po_number": form.get("po_number")})


ROUTES = [Route("/health", health), Route("/whoami", whoami), Route("/approve", approve, methods=["POST"])]
app = Starlette(
    routes=[*ROUTES, *sign_in.routes()],
    middleware=sign_in.middleware(),
)
