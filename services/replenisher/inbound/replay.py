"""Signatures seen within the replay window: the same signed request twice is refused.

In memory: after a restart, or at another replica, a replay within the window passes this
check, but it is forwarded under the same idempotency key (the sender's key, which the
signature covers, or else the signature itself), so Restate still delivers it once.
"""

from __future__ import annotations


class SeenSignatures:
    def __init__(self, window_seconds: float, limit: int = 100_000) -> None:
        self.window = window_seconds
        self.limit = limit
        self._expiry: dict[str, float] = {}

    def first_time(self, signature: str, now: float) -> bool:
        """Remember `signature`; False when it was already seen within the window."""
        self._forget_expired(now)
        if signature in self._expiry:
            return False
        self._expiry[signature] = now + 2 * self.window
        return True

    def forget(self, signature: str) -> None:
        """The request did not get through: the same signed request may be sent again."""
        self._expiry.pop(signature, None)

    def _forget_expired(self, now: float) -> None:
        # Expiries grow with insertion (the clock moves forward), so the oldest are at the front.
        # Past the limit the oldest go too: bounded whatever the traffic.
        while self._expiry:
            oldest, until = next(iter(self._expiry.items()))
            if until > now and len(self._expiry) < self.limit:
                return
            del self._expiry[oldest]
