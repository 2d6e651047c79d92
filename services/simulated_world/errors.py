"""Refusals the world answers with: each carries the HTTP status a real system would send."""

from __future__ import annotations


class WorldError(Exception):
    """A refusal with its HTTP status; the app answers it as `{"error": reason}` (routing.py)."""

    status = 400

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BadRequest(WorldError):
    status = 400


class NotFound(WorldError):
    status = 404


class Conflict(WorldError):
    status = 409


class Unprocessable(WorldError):
    """Understood and refused, e.g. a supplier that will not quote."""

    status = 422


class Unavailable(WorldError):
    """What a supplier that is down (or lost its answer) looks like to a caller."""

    status = 503
