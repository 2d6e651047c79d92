"""The console as a Starlette app: `hypercorn 'replenisher.console.app:create_app()'`, or `replenisher console`.

A thin face over the operator layer: each page parses its request, calls a use case and
renders a template. It reads Restate through ingress and the admin API and approval requests
from the manager's inbox, at the addresses its settings give (`ConsoleSettings`: whoever
builds the console passes them; `app` below, the ASGI entry point, reads them from the
environment), and holds no state of its own but the last outage it saw. Bind it to
loopback: like the admin API, it can approve purchases. A decision form carries the
request's one-time token, which another site cannot know, so a forged post cannot approve.
Every page is sent with `cache-control: no-store`: a page with a decision form holds a token.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from urllib.parse import parse_qs, quote

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from replenisher.adapters.people_file import MatrixFile
from replenisher.asgi_body import BodyTooLarge, ReadToTheEnd, read_body
from replenisher.console import pages
from replenisher.console.settings import ConsoleSettings
from replenisher.domain.audit import AuditRecord
from replenisher.domain.authority import Person, Refusal
from replenisher.domain.credentials import BadToken, issue, load_token_key
from replenisher.identity.web import SignIn
from replenisher.operations.audit import append_audit, read_day
from replenisher.operations.catalogue import ErpCatalogue
from replenisher.operations.decide import BadDecision, decide
from replenisher.operations.deployments import overview
from replenisher.operations.inbox import (
    ManagerInbox,
    NoPendingApproval,
    PendingApproval,
    pending_approvals,
    pending_for,
)
from replenisher.operations.overview import SkuPage, SkuQuery, page_of, sku_rows
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import NotFound, OperatorError, Refused, Unreachable
from replenisher.operations.restate.health import Health, ServiceDown
from replenisher.operations.restate.http import valid_sku
from replenisher.operations.restate.paused import RecentPaused
from replenisher.operations.settings_audit import record_settings_changes
from replenisher.operations.sku_page import listed_page
from replenisher.operations.spend import parsed_spend, spend
from replenisher.operations.timelines import chosen_run, load_run_timeline
from replenisher.templating import TIMELINE_STATIC, render
from replenisher.timeline.html import render_html
from replenisher.timeline.model import Timeline

log = logging.getLogger(__name__)
DECISION_TOKEN_DAYS = 5 / 1440
"""The console signs each decision it sends with a personal token of five minutes."""

MAX_FORM_BYTES = 16_384
MANAGER = "manager (console)"
_TIMEOUT = httpx.Timeout(30.0, connect=3.0)
NO_STORE = {"cache-control": "no-store"}
# The SKUs page's paused calls come from a scan of every invocation Restate keeps (seconds at 100,000
# SKUs): this console makes it at most this often, in the background, and reads the calls it found by
# id on every page (`paused.RecentPaused`). A call paused since shows within this and one scan's time.
PAUSED_SCAN_SECONDS = 30.0


@dataclass(frozen=True)
class Seen:
    """A request's own view of Restate: whether the service is down is asked once per request,
    and decides whether its reads go to the agents or to Restate's storage (`client`) and
    whether its page carries the banner that says so (`service_down`)."""

    client: RestateClient
    service_down: Health | None = None
    visitor: pages.Visitor | None = None


Handler = Callable[..., Awaitable[Response]]


def html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(body, status, headers={**NO_STORE, **(headers or {})})


def error(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    service_down: Health | None = None,
    visitor: pages.Visitor | None = None,
) -> HTMLResponse:
    return html(pages.error_page(status, message, service_down=service_down, visitor=visitor), status, headers)


def query_of(request: Request) -> dict[str, str]:
    """The query's parameters, the last value of a repeated one."""
    return dict(request.query_params)


async def form_of(request: Request) -> dict[str, str]:
    """A posted form's fields (the last value of a repeated one), refused above MAX_FORM_BYTES."""
    try:
        body = await read_body(request.receive, MAX_FORM_BYTES) or b""
    except BodyTooLarge as e:
        raise OperatorError("the form is too large") from e
    return {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


class Console:
    def __init__(self, settings: ConsoleSettings | None = None, now: Callable[[], float] = time.time) -> None:
        """`settings`: where Restate and the manager's inbox answer (local defaults without);
        `now`: the one clock the pages are written against."""
        self.settings = settings or ConsoleSettings()
        self.now = now
        # The last outage a page saw, and when: shown until Restate records the service answering.
        self._outage: tuple[Health, float] | None = None
        self._http: httpx.AsyncClient | None = None
        self._inbox: ManagerInbox | None = None
        self._catalogue: ErpCatalogue | None = None
        self.recent_paused = RecentPaused(PAUSED_SCAN_SECONDS)
        # Sign-in, when the settings name the people (REPLENISHER_PEOPLE_FILE): the matrix is read
        # and checked now (a mistake stops the console), and again whenever the file changes.
        self.people: MatrixFile | None = None
        self.sign_in: SignIn | None = None
        signing: list[Route] = []
        self.token_key: bytes | None = None
        """Makes personal tokens (`domain.credentials`): for the CLI, and for this console's own decisions."""
        if self.settings.sign_in is not None:
            self.people = MatrixFile(self.settings.sign_in.people_file)
            if self.settings.sign_in.personal_token_key_file is not None:
                self.token_key = load_token_key(self.settings.sign_in.personal_token_key_file)
            self.sign_in = SignIn(self.settings.sign_in, self.people.current, render, audit=self.audit, now=now)
            signing = self.sign_in.routes()
        # The console's stylesheet and scripts, and the timeline's stylesheet (its package is a namespace one:
        # named by its folder).
        static = StaticFiles(directory=TIMELINE_STATIC, packages=[("replenisher.console", "static")])
        self.app = Starlette(
            routes=[
                Route("/health", self.health, methods=["GET"]),
                Route("/", self.page(self.home), methods=["GET"]),
                Route("/inbox", self.page(self.inbox), methods=["GET"]),
                Route("/inbox/fragment", self.page(self.inbox_fragment), methods=["GET"]),
                Route("/approvals", self.page(self.approve), methods=["POST"]),
                Route("/skus", self.page(self.skus), methods=["GET"]),
                Route("/spend", self.page(self.spend), methods=["GET"]),
                Route("/audit", self.page(self.audit_page), methods=["GET"]),
                Route("/tokens", self.page(self.tokens_page), methods=["GET", "POST"]),
                Route("/deployments", self.page(self.deployments), methods=["GET"]),
                Route("/skus/{sku}", self.page(self.sku), methods=["GET"]),
                Route("/skus/{sku}/runs/{n:int}", self.page(self.run), methods=["GET"]),
                Route("/skus/{sku}/runs/{n:int}/fragment", self.page(self.fragment), methods=["GET"]),
                Route("/skus/{sku}/runs/{n:int}/timeline.html", self.page(self.download), methods=["GET"]),
                Mount("/static", static, name="static"),
                *signing,
            ],
            middleware=self.sign_in.middleware() if self.sign_in else None,
            exception_handlers={HTTPException: self.http_error},
            lifespan=self.lifespan,
        )
        self.app.router.redirect_slashes = False  # /inbox/ is no page, as it never was

        # A refusal known before the form is read (sign in first, no such page) keeps the connection usable.
        self.asgi = ReadToTheEnd(self.app, MAX_FORM_BYTES)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.asgi(scope, receive, send)

    @property
    def inbox_api(self) -> ManagerInbox:
        if self._inbox is None:
            self._inbox = ManagerInbox(self.settings.inbox_url)
        return self._inbox

    @property
    def catalogue(self) -> ErpCatalogue:
        # The ERP answers at the same place as the manager's inbox (the world, or the real systems behind it).
        if self._catalogue is None:
            self._catalogue = ErpCatalogue(self.settings.inbox_url)
        return self._catalogue

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=_TIMEOUT)
        return self._http

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.recent_paused.aclose()
            for client in (self._http, self._inbox, self._catalogue):
                if client is not None:
                    await client.aclose()

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """No such page, or not with this method: the console's own error page, not Starlette's."""
        assert isinstance(exc, HTTPException)
        path = request.scope["path"]
        if exc.status_code == 303 and exc.headers and "location" in exc.headers:
            return RedirectResponse(exc.headers["location"], 303, headers=NO_STORE)  # to sign in first
        if exc.status_code == 404:
            return error(404, f"no page at {path}")
        if exc.status_code == 405:
            return error(405, f"{request.method} is not allowed on {path}", exc.headers)
        return error(exc.status_code, exc.detail, exc.headers)

    def visitor(self, request: Request) -> pages.Visitor | None:
        """Who the page is for; without a session, an HTTPException that sends them to sign in."""
        if self.sign_in is None:
            return None
        person = self.sign_in.require(request, "view")
        csrf = self.sign_in.csrf_token(request)
        return pages.Visitor(
            person=person.id,
            name=person.name,
            may_approve=person.may("approve"),
            may_operate=person.may("operate"),
            csrf=csrf,
        )

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A page's endpoint: the request's own view of Restate (asked once whether the service is
        down, for the banner and for where reads go), and Restate's answers as error pages."""

        async def endpoint(request: Request) -> Response:
            visitor = self.visitor(request)  # not signed in: to the sign-in page, before anything is read
            await self.note_matrix_changes(request)
            client = RestateClient(self.settings.ingress_url, self.settings.admin_url, client=self.http, now=self.now)
            down: Health | None = None
            try:
                health = await self.remembered(client, await client.health())
                if health.service_down:
                    client.degraded = down = health
                return await handler(request, Seen(client, down, visitor), **request.path_params)
            except NotFound as e:
                return error(404, str(e), service_down=down, visitor=visitor)
            except Unreachable as e:
                return error(503, str(e), service_down=down, visitor=visitor)
            except ServiceDown as e:
                return error(503, str(e), service_down=down, visitor=visitor)
            except Refused as e:
                return error(502, f"Restate refused: {e}", service_down=down, visitor=visitor)
            except OperatorError as e:
                return error(400, str(e), service_down=down, visitor=visitor)
            finally:
                self.saw(client.degraded)

        return endpoint

    def saw(self, health: Health | None) -> None:
        """Note an outage Restate's records showed this request; one shown from memory keeps the
        time it was last seen, so a success since then still ends it."""
        remembered = self._outage[0] if self._outage is not None else None
        if health is not None and health.service_down and health is not remembered:
            self._outage = (health, self.now())

    async def remembered(self, client: RestateClient, health: Health) -> Health:
        """An outage a page saw stays shown until Restate records the service answering again.

        With every run suspended (their waits last days), only the console's own reads try the
        service; the one that found it down is dropped afterwards, and Restate would hold no
        evidence of the outage for the next page."""
        if self._outage is None:
            return health
        seen, at = self._outage
        if health.service_down:
            if not seen.service_down or await client.answered_since(at):
                return health
            # The outage this console saw first is the same one: it was down at least since its
            # first sign, whether a refused call or a look at the deployment (nothing in flight).
            if health.since is None:
                return health.model_copy(update={"since": seen.since, "found_at": seen.found_at or health.found_at})
            first = min(t for t in (health.since, seen.since, seen.found_at) if t is not None)
            return health.model_copy(update={"since": first})
        if await client.answered_since(at):
            self._outage = None
            return health
        return seen

    # --- pages -----------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return Response(json.dumps({"ok": True}), media_type="application/json", headers=NO_STORE)

    async def home(self, request: Request, seen: Seen) -> Response:
        return RedirectResponse("/inbox", 303, headers=NO_STORE)

    async def inbox_settings(self, pending: Sequence[PendingApproval] = ()) -> pages.InboxSettings:
        return pages.InboxSettings(
            currency=self.settings.currency,
            budget=await self.inbox_api.budget(),
            confirm_above=self.settings.confirm_above,
            # The requests' SKUs and suppliers: a copy read before one of them was set up is read again.
            catalogue=await self.catalogue.read({p.sku for p in pending}, {p.supplier for p in pending}),
        )

    async def inbox(
        self, request: Request, seen: Seen, flash: tuple[str, str] | None = None, status: int = 200
    ) -> Response:
        query = query_of(request)
        if request.method == "GET" and query:  # before any read: a bad query costs nothing
            raise OperatorError(f"bad query: unknown parameter {next(iter(query))!r} (the inbox takes none)")
        pending = await pending_approvals(seen.client, self.inbox_api)
        settings = await self.inbox_settings(pending)
        visitor = self.for_visitor(seen.visitor, pending)
        return html(
            pages.inbox(pending, self.now(), flash, settings, service_down=seen.service_down, visitor=visitor),
            status,
        )

    async def inbox_fragment(self, request: Request, seen: Seen) -> Response:
        pending = await pending_approvals(seen.client, self.inbox_api)
        settings = await self.inbox_settings(pending)
        return html(pages.inbox_fragment(pending, self.now(), settings, self.for_visitor(seen.visitor, pending)))

    async def approve(self, request: Request, seen: Seen) -> Response:
        form = await form_of(request)
        by, person_id = MANAGER, None
        if self.sign_in is not None:
            # Signed in: only a person who may approve, from a page of this console's, for this session.
            person = self.sign_in.require(request, "approve")
            self.sign_in.check_post(request, form)
            by, person_id = f"{person.id} (console)", person.id
            refused = await self.beyond_authority(request, seen, person, form)
            if refused is not None:
                return refused
        decision = form.get("decision")
        if decision not in ("approve", "reject"):
            return await self.inbox(request, seen, ("error", "choose Approve or Reject"), 400)
        if not form.get("token"):
            # Only a page this console served knows the token: a form posted from elsewhere does not.
            return await self.inbox(request, seen, ("error", "the decision must carry its request's token"), 400)
        up_to: float | None = None
        if decision == "approve" and form.get("up_to"):
            try:
                up_to = float(form["up_to"])
            except ValueError:
                return await self.inbox(request, seen, ("error", f"{form['up_to']!r} is not a price"), 400)
        if decision == "approve" and form.get("confirmed") != "yes":
            try:
                asked = await pending_for(seen.client, self.inbox_api, form.get("sku", ""), form["token"])
            except NoPendingApproval as e:
                return await self.inbox(request, seen, ("error", str(e)), 409)
            limit = up_to if up_to is not None else asked.unit_price
            confirms = asked.quantity * limit > self.settings.confirm_above and not asked.quote_expired(self.now())
            if asked.token == form["token"] and confirms:  # an expired quote orders nothing: no confirming
                settings = await self.inbox_settings([asked])
                note = form.get("note", "")[:2000]
                return html(
                    pages.confirm_page(
                        asked, limit, note, settings, service_down=seen.service_down, visitor=seen.visitor
                    )
                )
        try:
            decided = await decide(
                seen.client,
                self.inbox_api,
                form.get("sku", ""),
                approved=decision == "approve",
                up_to=up_to,
                note=form.get("note", "")[:2000],
                by=by,
                person=person_id,  # a run under the matrix checks the person, and the PO's digest sent with it
                credential=self.decision_token(person_id),
                token=form["token"],
                now=self.now(),
            )
        except NoPendingApproval as e:
            return await self.inbox(request, seen, ("error", str(e)), 409)
        except BadDecision as e:
            return await self.inbox(request, seen, ("error", str(e)), 400)
        number = pages.run_number(decided.run_id)
        if decided.accepted_as is not None:
            note = quote(decided.accepted_line())
        else:
            where = decided.routed_to or "the SKU (kept: no run waits for it)"
            note = quote(
                f"{decided.po_number} {decided.verdict}: delivered to {where}; below is what the run does next"
            )
        return RedirectResponse(f"/skus/{quote(decided.sku)}/runs/{number}?done={note}", 303, headers=NO_STORE)

    async def beyond_authority(
        self, request: Request, seen: Seen, person: Person, form: dict[str, str]
    ) -> Response | None:
        """An approval above the person's limit (for this supplier, today, acting for whom they may)
        is refused here with who can give it, and recorded; a rejection needs only the role."""
        if form.get("decision") != "approve" or self.people is None:
            return None
        try:
            asked = await pending_for(seen.client, self.inbox_api, form.get("sku", ""), form.get("token", ""))
        except NoPendingApproval:
            return None  # the decision itself says so, with its own status
        beyond = self.beyond_limit(person.id, asked)
        if beyond is None:
            return None
        reason = f"{asked.po_number} not approved: {beyond}"
        await self.audit("approval_refused", person.id, request, reason, what=asked.po_number)
        return await self.inbox(request, seen, ("error", reason), 403)

    async def note_matrix_changes(self, request: Request) -> None:
        """An edit of the people file, taken or refused since the last page, into the audit log."""
        if self.people is None:
            return
        for event, detail in self.people.drain():
            await self.audit(event, f"people file {self.people.path.name}", request, detail, what=detail)

    def beyond_limit(self, person_id: str, asked: PendingApproval) -> str | None:
        """Why `person_id` may not approve `asked` (its total above their limit that day), with who
        may; None if they may, or the console has no matrix."""
        if self.people is None:
            return None
        now = self.now()
        today = asked.calendar.local(now).date() if asked.calendar else datetime.fromtimestamp(now, UTC).date()
        matrix = self.people.current()
        granted = matrix.authority(person_id, asked.total, asked.supplier, today)
        if not isinstance(granted, Refusal):
            return None
        others = [who for who in matrix.approvers_for(asked.total, asked.supplier, today) if who != person_id]
        return granted.reason + (
            f"; it can be approved by {', '.join(others)}" if others else "; no one's limit covers it"
        )

    def for_visitor(self, visitor: pages.Visitor | None, pending: Sequence[PendingApproval]) -> pages.Visitor | None:
        """The visitor with the requests above their limit marked, so their cards say so up front."""
        if visitor is None or not visitor.may_approve:
            return visitor
        beyond = {p.po_number: why for p in pending if (why := self.beyond_limit(visitor.person, p)) is not None}
        return visitor.model_copy(update={"beyond_limit": beyond})

    async def audit(self, event: str, who: str, request: Request, result: str, *, what: str = "") -> None:
        """Into the day's `AuditLog` through ingress; an audit that cannot be written is logged, and
        the sign-in or refusal it records stands (the console never waits on the log to refuse)."""
        client = request.client.host if request.client else ""
        refused = event.endswith("_failed") or event.endswith("_refused")
        record = AuditRecord(
            at=self.now(),
            event=event,  # type: ignore[arg-type]
            who=who[:200],
            via="console",
            source=client,
            what=(what or result)[:1000],
            outcome="refused" if refused else "done",
            reason=result[:1000] if refused else "",
        )
        try:
            await append_audit(self.settings.ingress_url, record, client=self.http)
        except OperatorError as e:
            log.error("audit entry not written (%s): %s", e, record.model_dump_json())

    def decision_token(self, person_id: str | None) -> str | None:
        """A short-lived personal token for a decision this console sends for `person_id` (signed in)."""
        if person_id is None or self.token_key is None:
            return None
        return issue(self.token_key, person_id, now=self.now(), days=DECISION_TOKEN_DAYS)

    async def tokens_page(self, request: Request, seen: Seen) -> Response:
        """Personal tokens for the CLI: a person who may approve makes one for themselves, shown once."""
        if self.sign_in is None:
            return error(404, "personal tokens need sign-in (REPLENISHER_PEOPLE_FILE)")
        person = self.sign_in.require(request, "approve")
        made: str | None = None
        flash: tuple[str, str] | None = None
        status = 200
        if request.method == "POST":
            form = await form_of(request)
            self.sign_in.check_post(request, form)
            if self.token_key is None:
                flash, status = (
                    ("error", "this console has no REPLENISHER_PERSONAL_TOKEN_KEY_FILE to make tokens with"),
                    409,
                )
            else:
                try:
                    days = float(form.get("days", "") or "nan")
                    made = issue(self.token_key, person.id, now=self.now(), days=days)
                except ValueError as e:  # a `BadToken` (a length out of range) or no number
                    flash, status = (
                        ("error", f"no token made: {e if isinstance(e, BadToken) else 'days is a number'}"),
                        400,
                    )
                else:
                    until = datetime.fromtimestamp(self.now() + days * 86_400, UTC).strftime("%Y-%m-%d %H:%M UTC")
                    await self.audit("personal_token_made", person.id, request, f"a personal token until {until}")
                    flash = ("ok", f"made a personal token for {person.id}, valid until {until}: copy it now")
        body = pages.tokens_page(
            made, self.token_key is not None, flash, service_down=seen.service_down, visitor=seen.visitor
        )
        return html(body, status, headers=NO_STORE)

    async def audit_page(self, request: Request, seen: Seen) -> Response:
        """A day of the audit log (UTC; today by default), with its chain checked."""
        query = query_of(request)
        unknown = set(query) - {"day"}
        if unknown:
            raise OperatorError(f"bad query: unknown parameter {sorted(unknown)[0]!r} (the audit page takes day)")
        try:
            day = (
                date.fromisoformat(query["day"]) if query.get("day") else datetime.fromtimestamp(self.now(), UTC).date()
            )
        except ValueError:
            raise OperatorError(f"bad query: day {query['day']!r} is not a date (YYYY-MM-DD)") from None
        try:  # the service's settings changes first, if not yet in the log (operations.settings_audit)
            await record_settings_changes(
                await seen.client.registered_deployments(), self.settings.ingress_url, client=self.http
            )
        except OperatorError as e:
            log.warning("settings changes not checked: %s", e)
        read = await read_day(self.settings.ingress_url, day.isoformat(), client=self.http)
        page = pages.audit_page(read, day, service_down=seen.service_down, visitor=seen.visitor)
        return html(page)

    async def deployments(self, request: Request, seen: Seen) -> Response:
        """The registered deployments and what runs on each: for operators and admins when people sign in."""
        if self.sign_in is not None:
            self.sign_in.require(request, "operate")
        query = query_of(request)
        if query:
            raise OperatorError(f"bad query: unknown parameter {next(iter(query))!r} (the deployments page takes none)")
        found = await overview(seen.client)
        return html(pages.deployments_page(found, service_down=seen.service_down, visitor=seen.visitor))

    async def skus(self, request: Request, seen: Seen) -> Response:
        query = SkuQuery.parse(query_of(request))  # before any read: a bad query costs nothing
        budget = await self.inbox_api.budget()
        now = self.now()
        found: SkuPage | None = None
        if seen.service_down is None:
            try:  # the SKU list: only the page is read, whatever the order, filter or number of SKUs
                found, catalogue = await listed_page(
                    seen.client, query, budget, now, self.catalogue, self.recent_paused
                )
            except ServiceDown:
                found = None  # found down on the way: the agents' records from Restate's storage
        if found is None:
            catalogue = await self.catalogue.read()
            found = page_of(await sku_rows(seen.client, catalogue), query, budget, now)
        page = pages.skus(
            found,
            query,
            now,
            budget,
            catalogue,
            service_down=seen.service_down or seen.client.degraded,
            visitor=seen.visitor,
        )
        return html(page)

    async def spend(self, request: Request, seen: Seen) -> Response:
        query = parsed_spend(query_of(request))
        # Money and supplier names only: the manager's budget is not shown here, so not asked for.
        catalogue = await self.catalogue.read((), [query.supplier] if query.supplier else [])
        settings = pages.InboxSettings(currency=self.settings.currency, catalogue=catalogue)
        found = await spend(seen.client, query, self.now())
        if query.supplier and catalogue.error is None:
            known = set(catalogue.supplier_names) | set(found.ever_ordered_from)
            if query.supplier not in known:
                # Else the page offers a supplier nobody has, and a zero that looks like a fact.
                raise OperatorError(
                    f"bad query: supplier={query.supplier!r} is no supplier the ERP lists or any order names"
                )
        return html(pages.spend_page(found, settings, service_down=seen.service_down, visitor=seen.visitor))

    async def sku(self, request: Request, seen: Seen, sku: str) -> Response:
        record = await seen.client.sku_status(valid_sku(sku))
        try:
            paused = await seen.client.paused_of(record)
            self.recent_paused.saw(paused)
        except OperatorError:
            paused = []  # the page still shows what the agent holds
        catalogue = await self.catalogue.read({record.sku})
        down = seen.service_down
        if record.runs_started == 0:
            return html(
                pages.sku_detail(record, None, None, paused, catalogue, service_down=down, visitor=seen.visitor)
            )
        run_id = chosen_run(record, None)
        timeline = await load_run_timeline(seen.client, record, run_id)
        fragment_url = self._fragment_url(run_id)
        return html(
            pages.sku_detail(record, timeline, fragment_url, paused, catalogue, service_down=down, visitor=seen.visitor)
        )

    async def run(self, request: Request, seen: Seen, sku: str, n: int) -> Response:
        timeline, run_id = await self._timeline(seen, sku, n)
        done = request.query_params.get("done")
        flash = ("ok", done) if done else None
        return html(
            pages.run_page(
                timeline, self._fragment_url(run_id), flash, service_down=seen.service_down, visitor=seen.visitor
            )
        )

    async def fragment(self, request: Request, seen: Seen, sku: str, n: int) -> Response:
        timeline, run_id = await self._timeline(seen, sku, n)
        return html(pages.timeline_block(timeline, self._fragment_url(run_id)))

    async def download(self, request: Request, seen: Seen, sku: str, n: int) -> Response:
        timeline, _ = await self._timeline(seen, sku, n)
        return html(render_html(timeline))

    async def _timeline(self, seen: Seen, sku: str, n: int) -> tuple[Timeline, str]:
        record = await seen.client.sku_status(valid_sku(sku))
        run_id = chosen_run(record, n)
        return await load_run_timeline(seen.client, record, run_id), run_id

    @staticmethod
    def _fragment_url(run_id: str) -> str:
        return pages.run_href(run_id) + "/fragment"


def create_app() -> Console:
    """The ASGI entry point (`hypercorn 'replenisher.console.app:create_app()'`): its settings from the
    environment, read and checked when it is made (a mistake stops the server), not at import."""
    return Console(ConsoleSettings.from_environment(os.environ))
