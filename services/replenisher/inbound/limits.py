"""Rate limits at the door: token buckets per party, and per party and SKU. Pure, in memory.

Each party has its own buckets, so one supplier's flood spends only its own allowance and
never delays the manager's approvals or the warehouse's goods. A bucket holds `per_minute`
messages and refills at `per_minute / 60` a second: a burst of a minute's worth, then the
steady rate. Refused messages are counted per party, for the operators' `/stats`.

Bounded whatever the traffic: a party naming a fresh SKU in every message creates buckets, and
past `max_buckets` the ones that have refilled (they hold no history worth keeping) go first,
then the least recently used.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


@dataclass
class Bucket:
    tokens: float
    at: float

    def refill(self, now: float, capacity: float, per_second: float) -> None:
        self.tokens = min(capacity, self.tokens + max(0.0, now - self.at) * per_second)
        self.at = now


@dataclass
class Limiter:
    """One kind of bucket: `per_minute` messages a minute for each key; 0 means no limit."""

    per_minute: float
    max_buckets: int = 100_000
    _buckets: OrderedDict[str, Bucket] = field(default_factory=OrderedDict)

    @property
    def per_second(self) -> float:
        return self.per_minute / 60.0

    def wait(self, key: str, now: float) -> float:
        """Seconds until `key` may send one more (0: it may now). Spends nothing."""
        if self.per_minute <= 0:
            return 0.0
        bucket = self._buckets.get(key)
        if bucket is None:
            return 0.0
        bucket.refill(now, self.per_minute, self.per_second)
        return 0.0 if bucket.tokens >= 1 else (1 - bucket.tokens) / self.per_second

    def spend(self, key: str, now: float) -> None:
        if self.per_minute <= 0:
            return
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            bucket = Bucket(tokens=self.per_minute, at=now)
        bucket.refill(now, self.per_minute, self.per_second)
        bucket.tokens -= 1
        self._buckets[key] = bucket  # most recently used last
        if len(self._buckets) > self.max_buckets:
            self._trim(now)

    def __len__(self) -> int:
        return len(self._buckets)

    def _trim(self, now: float) -> None:
        for bucket in self._buckets.values():
            bucket.refill(now, self.per_minute, self.per_second)
        for key in [k for k, b in self._buckets.items() if b.tokens >= self.per_minute]:
            del self._buckets[key]
        while len(self._buckets) > self.max_buckets:
            self._buckets.popitem(last=False)


class DoorStats(BaseModel):
    """What the door let through and refused, per party, since it started (`GET /stats`)."""

    forwarded: dict[str, int]
    refused: dict[str, dict[str, int]]
    limits: dict[str, float]


@dataclass
class RateLimits:
    """The door's limits: a message passes only when both its party's and its party-and-SKU's
    bucket have room, and then spends from both."""

    per_party: Limiter
    per_party_and_sku: Limiter
    forwarded: Counter[str] = field(default_factory=Counter)
    refused: dict[str, Counter[str]] = field(default_factory=dict)
    max_parties_counted: int = 1_000

    @classmethod
    def of(cls, per_party_per_minute: float, per_sku_per_minute: float) -> RateLimits:
        return cls(Limiter(per_party_per_minute), Limiter(per_sku_per_minute))

    def retry_after(self, party: str, sku: str, now: float) -> int | None:
        """None when the message may pass (and it is counted against both limits), else the
        whole seconds the party should wait before sending again."""
        wait = max(self.per_party.wait(party, now), self.per_party_and_sku.wait(f"{party} {sku}", now))
        if wait > 0:
            return max(1, math.ceil(wait))
        self.per_party.spend(party, now)
        self.per_party_and_sku.spend(f"{party} {sku}", now)
        return None

    def count_refused(self, party: str, status: int) -> None:
        self.refused.setdefault(self._counted_as(party, self.refused), Counter())[str(status)] += 1

    def count_forwarded(self, party: str) -> None:
        self.forwarded[self._counted_as(party, self.forwarded)] += 1

    def _counted_as(self, party: str, counts: dict[str, Any]) -> str:
        """The party's own name while the counts name fewer than `max_parties_counted`."""
        return party if party in counts or len(counts) < self.max_parties_counted else "(others)"

    def stats(self) -> DoorStats:
        return DoorStats(
            forwarded=dict(self.forwarded),
            refused={party: dict(counts) for party, counts in self.refused.items()},
            limits={
                "per_party_per_minute": self.per_party.per_minute,
                "per_party_and_sku_per_minute": self.per_party_and_sku.per_minute,
            },
        )
