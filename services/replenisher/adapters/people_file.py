"""The authority matrix file as the console and the service read it: checked whole at start,
re-read when it changes (a delegation added for someone's leave counts from the next read, with
no restart of either).

A mistake at start stops the process with the file's own error. A mistake in a later edit keeps
the last good matrix in force (a half-saved file must not lock everyone out, nor let anyone in)
and says so in the log and on `error` until the file is right again.

The service reads it only inside journaled steps (a decision's standing, whom a request asks),
so a run replays what it read then, whatever the file says now.
"""

from __future__ import annotations

import logging
import os
from datetime import date
from pathlib import Path

from replenisher.domain.authority import (
    AuthorityFileError,
    AuthorityMatrix,
    Standing,
    changes_between,
    load_authority,
)

log = logging.getLogger(__name__)


class MatrixFile:
    def __init__(self, path: Path, loaded: AuthorityMatrix | None = None) -> None:
        """`loaded`: the file's matrix as the caller just read (and checked) it, not read again."""
        self.path = path
        self._stamp = self._stat()
        self._matrix = loaded if loaded is not None else load_authority(path)  # a mistake: AuthorityFileError
        self.error: str | None = None
        self._events: list[tuple[str, str]] = []

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def current(self) -> AuthorityMatrix:
        stamp = self._stat()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                fresh = load_authority(self.path)
            except AuthorityFileError as e:
                self.error = f"{e} (the last good matrix stays in force)"
                self._events.append(("matrix_refused", self.error))
                log.error("%s", self.error)
                return self._matrix
            changed = changes_between(self._matrix, fresh)
            self._matrix, self.error = fresh, None
            if changed:
                self._events.append(("matrix_changed", "; ".join(changed)))
            log.warning("authority matrix re-read from %s: %s", self.path, "; ".join(changed) or "no change")
        return self._matrix

    def drain(self) -> list[tuple[str, str]]:
        """What happened to the file since the last call: (event, what) for the audit log."""
        events, self._events = self._events, []
        return events

    # --- what the service reads, each from the matrix in force now (`domain.ports.Roster`) ---------

    def standing(self, person_id: str, day: date) -> Standing:
        return self.current().standing(person_id, day)

    def to_ask(
        self, total: float, supplier: str, day: date, *, skip: frozenset[str] = frozenset(), wanted: int | None = None
    ) -> tuple[str, ...]:
        return self.current().to_ask(total, supplier, day, skip=skip, wanted=wanted)

    def signatures_needed(self, total: float) -> int:
        return self.current().signatures_needed(total)
