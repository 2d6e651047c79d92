"""What a person is told when Restate cannot do what was asked, in one line each."""

from __future__ import annotations


class OperatorError(Exception):
    """Something a person must be told about, in one line."""


class Unreachable(OperatorError):
    pass


class NotFound(OperatorError):
    pass


class Refused(OperatorError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
