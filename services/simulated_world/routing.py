"""What FastAPI does not do the world's way: its error shape, strict JSON bodies, and the envelope.

The world answers every refusal as `{"error": reason}` with the status a real system would send
(400 for bad input, never FastAPI's 422 body), reads a JSON body strictly (`"on_hand": "40"` is a
typo to refuse, not a value to guess), keeps `%2F` inside a path segment (a PO number may hold a
slash), treats an empty query filter (`?sku=`) as no filter, bounds a body's size, and records
the agent's calls with the status each got. The routes themselves are FastAPI's (app.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import BaseRoute

from replenisher.asgi_body import BodyTooLarge, read_body
from simulated_world.errors import BadRequest, WorldError

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1_000_000


class ErrorBody(BaseModel):
    """Every refusal: the reason, for a person or a caller to fix the request by."""

    error: str


def describe_validation_error(exc: ValidationError | RequestValidationError) -> str:
    """One line per problem, naming the field, so a caller can fix the request without guessing."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


# --- path segments ---------------------------------------------------------------------


class SegmentConvertor(Convertor[str]):
    """One path segment, `%2F` and `%25` in it decoded: the envelope leaves those two encoded in
    the path it routes on, so a PO number holding a slash stays one segment."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return quote(value, safe="")


register_url_convertor("segment", SegmentConvertor())


def split_path(scope: Scope) -> list[str]:
    # raw_path keeps %2F inside a segment (a PO number may hold a slash) apart from separators.
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    raw = raw.split(b"?", 1)[0]
    return [unquote(part.decode("latin-1"), errors="strict") for part in raw.strip(b"/").split(b"/")]


def routing_path(segments: list[str]) -> str:
    """The path FastAPI routes on: each segment decoded, except a slash or percent inside one."""
    return "/" + "/".join(segment.replace("%", "%25").replace("/", "%2F") for segment in segments)


def without_blank_values(query_string: bytes) -> tuple[bytes, dict[str, str]]:
    # An empty filter (`?sku=`) means "no filter", not "match the empty string".
    pairs = [(k, v) for k, v in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True) if v]
    return urlencode(pairs).encode("latin-1"), dict(pairs)


# --- strict bodies ---------------------------------------------------------------------


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is validated strictly against its model before FastAPI reads it."""

    async def before_body(self, request: Request) -> None:
        """What the route checks before it looks at the body at all (nothing, here)."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handler = super().get_route_handler()
        model = self.body_field.field_info.annotation if self.body_field is not None else None
        strict_model = model if isinstance(model, type) and issubclass(model, BaseModel) else None

        async def strict(request: Request) -> Response:
            await self.before_body(request)
            if strict_model is None:
                return await handler(request)
            body = await request.body()
            if not body:
                raise BadRequest("a JSON body is required")
            try:
                strict_model.model_validate_json(body, strict=True)
            except ValidationError as exc:
                raise BadRequest(describe_validation_error(exc)) from exc
            return await handler(request)

        return strict


# --- errors ----------------------------------------------------------------------------


def refusal(status: int, reason: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ErrorBody(error=reason).model_dump(), status_code=status, headers=headers)


def allowed_methods(routes: Sequence[BaseRoute], path: str) -> list[str]:
    return sorted(
        {
            method
            for route in routes
            if isinstance(route, APIRoute) and route.path_regex.match(path)
            for method in route.methods
        }
    )


def install_error_handlers(app: FastAPI, routes: Sequence[BaseRoute]) -> None:
    """The world's refusals keep their shape and codes: `{"error": reason}`, 400 for bad input,
    and a 405's `Allow` names every method of the path among `routes`."""

    async def world_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WorldError)
        return refusal(exc.status, exc.reason)

    async def invalid_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return refusal(400, describe_validation_error(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return refusal(404, "no such route")
        if exc.status_code == 405:
            allowed = allowed_methods(routes, request.scope["path"])
            return refusal(405, f"method {request.method} not allowed here", {"allow": ", ".join(allowed)})
        return refusal(exc.status_code, str(exc.detail), dict(exc.headers or {}))

    app.add_exception_handler(WorldError, world_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)


# --- the envelope ----------------------------------------------------------------------


class Envelope:
    """Around the FastAPI app: the path as the world routes it, blank query values dropped, the
    body read whole up to its bound (and read as JSON whatever its content-type says), any
    unhandled error answered `{"error": ...}` with 500, and each answered request observed."""

    def __init__(self, app: ASGIApp, observe: Callable[[Scope, bytes, dict[str, str], int], None]) -> None:
        self.app = app
        self._observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            segments = split_path(scope)
        except UnicodeDecodeError:
            await self._answer(send, refusal(400, "path is not valid UTF-8"))
            return
        try:
            body = await read_body(receive, MAX_BODY_BYTES)
        except BodyTooLarge as exc:
            await self._answer(send, refusal(413, str(exc)))
            return
        if body is None:
            return
        query_string, query = without_blank_values(scope.get("query_string", b""))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
        if body:
            headers.append((b"content-type", b"application/json"))
        scope = {**scope, "path": routing_path(segments), "query_string": query_string, "headers": headers}
        status = 500
        started = False

        async def replay() -> Message:
            nonlocal body
            chunk, body = body, b""
            return {"type": "http.request", "body": chunk, "more_body": False}

        async def send_status(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            await send(message)

        original = body
        try:
            await self.app(scope, replay, send_status)
        except Exception as exc:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            status = 500
            if not started:
                await self._answer(send, refusal(500, f"internal error: {type(exc).__name__}"))
        self._observe(scope, original, query, status)

    @staticmethod
    async def _answer(send: Send, response: JSONResponse) -> None:
        await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})


def loose_json(body: bytes) -> Any:
    """Best-effort read of a body for bookkeeping; never raises."""
    try:
        return json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return None
