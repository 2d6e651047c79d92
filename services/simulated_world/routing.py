"""A small JSON-over-HTTP router on raw ASGI.

The world needs path templates, method dispatch, pydantic-validated JSON bodies and one
error shape (`{"error": reason}`). That is about a hundred lines on raw ASGI, so the world
ships without a web framework dependency; hypercorn serves it like any ASGI app.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl, unquote

from pydantic import BaseModel, ValidationError

from replenisher.asgi_body import BodyTooLarge, read_body
from simulated_world.errors import BadRequest, MethodNotAllowed, NotFound, PayloadTooLarge, WorldError

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

C = TypeVar("C")
M = TypeVar("M", bound=BaseModel)

MAX_BODY_BYTES = 1_000_000


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem, naming the field, so a caller can fix the request without guessing."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    path_params: dict[str, str]
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def parse(self, model: type[M]) -> M:
        if not self.body:
            raise BadRequest("a JSON body is required")
        try:
            # Strict: `"auto_approve": "yes"` or `"on_hand": "40"` is a typo to refuse, not a value to guess.
            return model.model_validate_json(self.body, strict=True)
        except ValidationError as exc:
            raise BadRequest(describe_validation_error(exc)) from exc

    def parse_query(self, model: type[M]) -> M:
        try:
            return model.model_validate(self.query)
        except ValidationError as exc:
            raise BadRequest(describe_validation_error(exc)) from exc

    def loose_json(self) -> Any:
        """Best-effort read of the body for bookkeeping; never raises."""
        try:
            return json.loads(self.body) if self.body else None
        except (ValueError, UnicodeDecodeError):
            return None


@dataclass(frozen=True)
class Response:
    status: int
    content: BaseModel | dict[str, Any]
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def encode(self) -> bytes:
        if isinstance(self.content, BaseModel):
            return self.content.model_dump_json().encode()
        return json.dumps(self.content).encode()


def ok(content: BaseModel | dict[str, Any], status: int = 200) -> Response:
    return Response(status, content)


def error_response(err: WorldError) -> Response:
    headers = []
    if isinstance(err, MethodNotAllowed):
        headers.append((b"allow", ", ".join(err.allowed).encode()))
    return Response(err.status, {"error": err.reason}, headers)


Handler = Callable[[C, Request], Awaitable[Response]]
"""Handlers get the application's context (built at startup) and the request."""


@dataclass(frozen=True)
class Route(Generic[C]):
    method: str
    segments: tuple[str, ...]
    handler: Handler[C]
    call: tuple[str, str] | None
    """(service, operation) when calls on this route are worth recording, else None."""

    def match(self, segments: list[str]) -> dict[str, str] | None:
        if len(segments) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for pattern, actual in zip(self.segments, segments, strict=True):
            if pattern.startswith("{") and pattern.endswith("}"):
                if not actual:
                    return None
                params[pattern[1:-1]] = actual
            elif pattern != actual:
                return None
        return params


class Router(Generic[C]):
    def __init__(self) -> None:
        self.routes: list[Route[C]] = []

    def route(
        self, method: str, template: str, *, call: tuple[str, str] | None = None
    ) -> Callable[[Handler[C]], Handler[C]]:
        segments = tuple(template.strip("/").split("/"))

        def register(handler: Handler[C]) -> Handler[C]:
            self.routes.append(Route(method, segments, handler, call))
            return handler

        return register

    def resolve(self, method: str, segments: list[str]) -> tuple[Route[C], dict[str, str]]:
        allowed: list[str] = []
        for route in self.routes:
            params = route.match(segments)
            if params is None:
                continue
            if route.method == method:
                return route, params
            allowed.append(route.method)
        if allowed:
            raise MethodNotAllowed(f"method {method} not allowed here", sorted(set(allowed)))
        raise NotFound("no such route")


def split_path(scope: Scope) -> list[str]:
    # raw_path keeps %2F inside a segment (a PO number may hold a slash) apart from separators.
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    raw = raw.split(b"?", 1)[0]
    return [unquote(part.decode("latin-1"), errors="strict") for part in raw.strip(b"/").split(b"/")]


def parse_query(scope: Scope) -> dict[str, str]:
    text = scope.get("query_string", b"").decode("latin-1")
    # An empty filter (`?sku=`) means "no filter", not "match the empty string".
    return {key: value for key, value in parse_qsl(text, keep_blank_values=True) if value}


Observer = Callable[[C, Route[C], Request, int], None]


class JsonApp(Generic[C]):
    """An ASGI app: lifespan builds the context, HTTP requests are dispatched through a Router."""

    def __init__(
        self,
        router: Router[C],
        *,
        startup: Callable[[], Awaitable[C]],
        shutdown: Callable[[C], Awaitable[None]],
        observe: Observer[C] | None = None,
    ) -> None:
        self.router = router
        self._startup = startup
        self._shutdown = shutdown
        self._observe = observe
        self.context: C | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    self.context = await self._startup()
                except Exception as exc:
                    log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.context is not None:
                    try:
                        await self._shutdown(self.context)
                    except Exception as exc:
                        log.exception("shutdown failed")
                        await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
                        return
                    self.context = None
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _read_body(self, receive: Receive) -> bytes | None:
        try:
            return await read_body(receive, MAX_BODY_BYTES)
        except BodyTooLarge as e:
            raise PayloadTooLarge(str(e)) from e

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: Route[C] | None = None
        request: Request | None = None
        try:
            segments = split_path(scope)
            route, params = self.router.resolve(scope["method"], segments)
            body = await self._read_body(receive)
            if body is None:
                return
            request = Request(
                method=scope["method"],
                path=scope["path"],
                path_params=params,
                query=parse_query(scope),
                headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
                body=body,
            )
            if self.context is None:
                response = Response(503, {"error": "the world is not started"})
            else:
                response = await route.handler(self.context, request)
        except WorldError as err:
            response = error_response(err)
        except UnicodeDecodeError:
            response = Response(400, {"error": "path is not valid UTF-8"})
        except Exception as exc:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            response = Response(500, {"error": f"internal error: {type(exc).__name__}"})
        if self._observe is not None and self.context is not None and route and request:
            self._observe(self.context, route, request, response.status)
        await self._send(send, response)

    @staticmethod
    async def _send(send: Send, response: Response) -> None:
        body = response.encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *response.headers,
        ]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
