"""Who may approve what: the purchasing team's people, roles, limits and delegations.

The product's own authority matrix, read from a TOML file the team keeps (see
docs/operating/people.md). Pure rules over it, no I/O past reading the text:

- a person approves an order only if they hold the `approver` role and the order's total is
  within their limit (their limit for that supplier, where one is set);
- a person on leave hands their approvals to a named delegate for a range of dates on the site
  calendar: inside those dates the delegate may approve what the absent person could, and
  requests meant for the absent person go to the delegate; outside them, nothing changes;
- an order whose total is above the two-person threshold needs two different people; one
  person's signature counts once, whoever they act for;
- what was approved is bound by a digest of the PO's terms, so a signature given for one
  revision of a PO cannot approve a re-quoted one.

Roles are separate duties: an `admin` changes the matrix and settings but approves nothing
unless they also hold `approver`; a `viewer` only reads.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from replenisher.domain.documents import PersonId, SupplierId, without_unset

Role = Literal["approver", "operator", "viewer", "admin"]
Action = Literal["view", "approve", "operate", "administer"]
ROLE_ACTIONS: dict[Role, frozenset[Action]] = {
    "viewer": frozenset({"view"}),
    "approver": frozenset({"view", "approve"}),
    "operator": frozenset({"view", "operate"}),
    "admin": frozenset({"view", "operate", "administer"}),
}
"""What each role lets a person do. `admin` does not imply `approve`: whoever keeps the
matrix should not be able to grant themselves the money it guards."""

Email = Annotated[str, Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]
PasswordHash = Annotated[
    str, Field(max_length=400, pattern=r"^\$argon2(id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$")
]
"""An argon2 hash in its standard text form (never a password): `replenisher people hash-password` makes one."""
Money = Annotated[float, Field(ge=0, le=1_000_000_000_000)]
"""An order total (quantity x unit price) in the site's currency."""


class Person(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: PersonId
    name: str = Field(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$")
    email: Email
    roles: tuple[Role, ...] = Field(min_length=1)
    limit: Money = Field(default=0, description="the highest order total they may approve")
    supplier_limits: dict[SupplierId, Money] = Field(
        default_factory=dict, description="a different limit for orders from these suppliers"
    )
    password_hash: PasswordHash | None = Field(
        default=None, description="for signing in to the console without an identity provider", repr=False
    )
    tokens_not_before: datetime | None = Field(
        default=None,
        description="personal tokens made before this instant do not count (how a lost token is revoked)",
    )

    @field_validator("tokens_not_before")
    @classmethod
    def _an_instant(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("needs a time zone (e.g. 2026-12-05T09:00:00Z): it is compared with instants")
        return value

    @model_validator(mode="after")
    def _limits_need_the_role(self) -> Person:
        if (self.limit or self.supplier_limits) and "approver" not in self.roles:
            raise ValueError("has a limit but not the `approver` role: give the role or drop the limit")
        return self

    def may(self, action: Action) -> bool:
        return any(action in ROLE_ACTIONS[role] for role in self.roles)

    def own_limit(self, supplier: str) -> float:
        """The highest order total this person may approve from `supplier` on their own authority."""
        if not self.may("approve"):
            return 0.0
        return self.supplier_limits.get(supplier, self.limit)


class Delegation(BaseModel):
    """`from_` is away from `starts` to `ends` (both inclusive, site calendar dates); `to` acts for them."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: PersonId = Field(alias="from")
    to: PersonId
    starts: date
    ends: date
    note: str = Field(default="", max_length=500)

    @model_validator(mode="after")
    def _a_real_range(self) -> Delegation:
        if self.from_ == self.to:
            raise ValueError(f"{self.from_} cannot delegate to themselves")
        if self.ends < self.starts:
            raise ValueError(f"ends ({self.ends}) is before starts ({self.starts})")
        return self

    def active_on(self, day: date) -> bool:
        return self.starts <= day <= self.ends


class Authority(BaseModel):
    """Why a person may approve an order: on their own limit, or acting for someone away."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    person: PersonId
    limit: float
    acting_for: PersonId | None = None


class Refusal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str


class Signature(BaseModel):
    """One person's approval of one PO's terms, as the run keeps it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    person: PersonId
    limit: float
    acting_for: PersonId | None = None
    digest: str
    at: float


def order_digest(
    *, po_number: str, revision: int, supplier: str, quantity: int, unit_price: float, quote_id: str
) -> str:
    """What an approval approves, as a short hash: any change of terms (a re-quote is a new revision)
    gives another digest, so a signature cannot move from one set of terms to another."""
    terms = {
        "po_number": po_number,
        "revision": revision,
        "supplier": supplier,
        "quantity": quantity,
        "unit_price": repr(float(unit_price)),
        "quote_id": quote_id,
    }
    canonical = json.dumps(terms, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class AuthorityMatrix(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    two_person_threshold: Money | None = Field(
        default=None, description="orders whose total is above this need two different approvers"
    )
    people: tuple[Person, ...] = Field(min_length=1)
    delegations: tuple[Delegation, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> AuthorityMatrix:
        ids = [p.id for p in self.people]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"person {', '.join(twice)} is listed more than once")
        emails = [p.email.lower() for p in self.people]
        shared = sorted({e for e in emails if emails.count(e) > 1})
        if shared:
            raise ValueError(f"email {', '.join(shared)} belongs to more than one person")
        if not any(p.may("approve") for p in self.people):
            raise ValueError("no one has the `approver` role: no order could ever be approved")
        known = set(ids)
        for d in self.delegations:
            for who in (d.from_, d.to):
                if who not in known:
                    raise ValueError(f"delegation {d.from_} -> {d.to}: {who} is not one of the people")
            if not self.person(d.from_).may("approve"):
                raise ValueError(f"delegation {d.from_} -> {d.to}: {d.from_} approves nothing to hand over")
        for a in self.delegations:
            for b in self.delegations:
                if a is b:
                    continue
                overlap = a.starts <= b.ends and b.starts <= a.ends
                if overlap and a.from_ == b.from_:
                    raise ValueError(
                        f"{a.from_} delegates twice over the same days ({a.starts}..{a.ends} to {a.to}, "
                        f"{b.starts}..{b.ends} to {b.to}): name one delegate per day"
                    )
                if overlap and a.to == b.from_:
                    raise ValueError(
                        f"{a.from_} delegates to {a.to}, who is away then too (delegating to {b.to}): "
                        "delegations are not followed in chains; name the final delegate"
                    )
        if self.two_person_threshold is not None:
            above = [p.id for p in self.people if p.may("approve") and _highest(p) > self.two_person_threshold]
            if len(above) < 2:
                raise ValueError(
                    f"two_person_threshold is {self.two_person_threshold:g} but "
                    f"{'only ' + above[0] if above else 'no one'} may approve above it: "
                    "such orders could never get two signatures"
                )
        return self

    # --- reading the matrix ---------------------------------------------------------------

    def person(self, person_id: str) -> Person:
        for p in self.people:
            if p.id == person_id:
                return p
        raise KeyError(person_id)

    def current(self) -> AuthorityMatrix:
        """This matrix (a `MatrixFile` gives the one its file holds now): either can be read the same way."""
        return self

    def tokens_not_before(self, person_id: str) -> float | None:
        person = self.find(person_id)
        return person.tokens_not_before.timestamp() if person and person.tokens_not_before else None

    def find(self, person_id: str) -> Person | None:
        return next((p for p in self.people if p.id == person_id), None)

    def away(self, person_id: str, day: date) -> Delegation | None:
        """The delegation that covers `person_id` on `day`, if they are away."""
        return next((d for d in self.delegations if d.from_ == person_id and d.active_on(day)), None)

    def signatures_needed(self, total: float) -> int:
        threshold = self.two_person_threshold
        return 2 if threshold is not None and total > threshold else 1

    # --- the rules --------------------------------------------------------------------------

    def standing(self, person_id: str, day: date) -> Standing:
        """What `person_id` may approve on site date `day`, read out of the matrix: their own limits,
        those of each person away that day they act for, and the two-person threshold. All a run
        needs to judge their decision, so it can keep it (journaled) and never read the file again."""
        person = self.find(person_id)
        if person is None:
            return Standing(person=person_id, day=day, two_person_threshold=self.two_person_threshold)
        return Standing(
            person=person.id,
            day=day,
            known=True,
            own=Limits.of(person),
            acting_for=tuple(
                Limits.of(self.person(d.from_), acting_for=d.from_)
                for d in self.delegations
                if d.to == person.id and d.active_on(day)
            ),
            two_person_threshold=self.two_person_threshold,
        )

    def authority(self, person_id: str, total: float, supplier: str, day: date) -> Authority | Refusal:
        """May `person_id` approve an order of `total` from `supplier` on site date `day`? The
        widest authority they hold that day: their own limit, or that of someone they stand in for."""
        return self.standing(person_id, day).authority(total, supplier)

    def approvers_for(self, total: float, supplier: str, day: date) -> list[PersonId]:
        """Who to ask, in order: people whose own limit covers the total, lowest limit first (the
        order goes no higher than it must), each replaced by their delegate while they are away."""
        covering = sorted(
            (p for p in self.people if p.may("approve") and p.own_limit(supplier) >= total),
            key=lambda p: (p.own_limit(supplier), p.id),
        )
        asked: list[PersonId] = []
        for p in covering:
            leave = self.away(p.id, day)
            who = leave.to if leave else p.id
            if who not in asked:
                asked.append(who)
        return asked

    def to_ask(
        self, total: float, supplier: str, day: date, *, skip: frozenset[str] = frozenset(), wanted: int | None = None
    ) -> tuple[PersonId, ...]:
        """Whom a request for this order goes to on `day`: as many people as it needs signatures
        (`wanted`, else all of them), in `approvers_for`'s order, leaving out `skip` (those already
        asked or signed). Empty when no one left may approve it."""
        wanted = self.signatures_needed(total) if wanted is None else wanted
        return tuple(p for p in self.approvers_for(total, supplier, day) if p not in skip)[: max(wanted, 0)]

    def sign(
        self,
        signatures: tuple[Signature, ...],
        person_id: str,
        *,
        total: float,
        supplier: str,
        day: date,
        digest: str,
        expected_digest: str,
        at: float,
    ) -> tuple[Signature, ...] | Refusal:
        """Add `person_id`'s approval to those a PO already has, or say why not. Nothing changes on a refusal."""
        return self.standing(person_id, day).sign(
            signatures, total=total, supplier=supplier, digest=digest, expected_digest=expected_digest, at=at
        )

    def approved(self, signatures: tuple[Signature, ...], total: float, digest: str) -> bool:
        """Enough different people have signed these very terms."""
        people = {s.person for s in signatures if s.digest == digest and s.limit >= total}
        return len(people) >= self.signatures_needed(total)


def changes_between(old: AuthorityMatrix, new: AuthorityMatrix) -> list[str]:
    """What an edit of the matrix changed, in words an auditor reads (passwords only as "changed")."""
    said: list[str] = []
    before, after = {p.id: p for p in old.people}, {p.id: p for p in new.people}
    for pid in sorted(after.keys() - before.keys()):
        p = after[pid]
        said.append(f"added {pid} ({', '.join(p.roles)}{f', limit {p.limit:,.2f}' if p.may('approve') else ''})")
    said.extend(f"removed {pid}" for pid in sorted(before.keys() - after.keys()))
    for pid in sorted(before.keys() & after.keys()):
        a, b = before[pid], after[pid]
        if a.roles != b.roles:
            said.append(f"{pid}: roles {', '.join(a.roles)} -> {', '.join(b.roles)}")
        if a.limit != b.limit:
            said.append(f"{pid}: limit {a.limit:,.2f} -> {b.limit:,.2f}")
        if a.supplier_limits != b.supplier_limits:
            said.append(f"{pid}: supplier limits {a.supplier_limits or '{}'} -> {b.supplier_limits or '{}'}")
        if a.email != b.email or a.name != b.name:
            said.append(f"{pid}: name or email changed")
        if a.password_hash != b.password_hash:
            said.append(f"{pid}: password changed")
    if old.two_person_threshold != new.two_person_threshold:
        said.append(f"two-person threshold {old.two_person_threshold} -> {new.two_person_threshold}")

    def key(d: Delegation) -> str:
        return f"{d.from_} -> {d.to} {d.starts}..{d.ends}"

    said.extend(
        f"delegation added: {key(d)}" for d in new.delegations if key(d) not in {key(x) for x in old.delegations}
    )
    said.extend(
        f"delegation removed: {key(d)}" for d in old.delegations if key(d) not in {key(x) for x in new.delegations}
    )
    return said


class Limits(BaseModel):
    """One person's limits as the matrix set them: theirs, or those of someone they act for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approver: bool = Field(description="holds the `approver` role (else every limit is 0)")
    limit: float = 0.0
    supplier_limits: dict[str, float] = Field(default_factory=dict)
    acting_for: PersonId | None = None

    @classmethod
    def of(cls, person: Person, acting_for: str | None = None) -> Limits:
        approver = person.may("approve")
        return cls(
            approver=approver,
            limit=person.limit if approver else 0.0,
            supplier_limits=dict(person.supplier_limits) if approver else {},
            acting_for=acting_for,
        )

    def for_supplier(self, supplier: str) -> float:
        if not self.approver:
            return 0.0
        return self.supplier_limits.get(supplier, self.limit)


class Standing(BaseModel):
    """One person's standing in the matrix on one site date (`AuthorityMatrix.standing`): read where
    a decision arrives and journaled with it, so a run judges it the same on every replay."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    person: str = Field(max_length=64)
    day: date
    known: bool = Field(default=False, description="one of the people in the matrix")
    own: Limits = Field(default_factory=lambda: Limits(approver=False))
    acting_for: tuple[Limits, ...] = Field(default=(), description="for each person away that day they stand in for")
    two_person_threshold: float | None = None
    refused: str | None = Field(
        default=None, description="why the decision does not count as this person's at all (their token did not)"
    )

    @model_serializer(mode="wrap")
    def _as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Journaled (the standing step, the message to the run): written as before when not refused.
        return without_unset(handler(self), "refused")

    @property
    def approver(self) -> bool:
        """May decide on a purchase at all: holds the approver role, or acts for someone who does."""
        return self.known and not self.refused and (self.own.approver or any(a.approver for a in self.acting_for))

    def signatures_needed(self, total: float) -> int:
        threshold = self.two_person_threshold
        return 2 if threshold is not None and total > threshold else 1

    def authority(self, total: float, supplier: str) -> Authority | Refusal:
        """The narrowest authority this person holds that covers `total` from `supplier`, or why none does."""
        if not self.known:
            return Refusal(reason=f"{self.person!r} is not one of the people in the authority matrix")
        if self.refused:
            return Refusal(reason=self.refused)
        options = [
            Authority(person=self.person, limit=limits.for_supplier(supplier), acting_for=limits.acting_for)
            for limits in (self.own, *self.acting_for)
        ]
        covering = [a for a in options if a.limit >= total]
        if covering:
            # The narrowest authority that covers it: acting for someone else only when one's own falls short.
            return min(covering, key=lambda a: (a.acting_for is not None, a.limit))
        if not self.own.approver and len(options) == 1:
            return Refusal(reason=f"{self.person} does not have the approver role")
        widest = max(options, key=lambda a: a.limit)
        acting = f" (acting for {widest.acting_for})" if widest.acting_for else ""
        return Refusal(
            reason=f"the order's total {total:,.2f} is above {self.person}'s limit of {widest.limit:,.2f}{acting}"
        )

    def sign(
        self,
        signatures: tuple[Signature, ...],
        *,
        total: float,
        supplier: str,
        digest: str | None,
        expected_digest: str,
        at: float,
    ) -> tuple[Signature, ...] | Refusal:
        """Add this person's approval to those a PO already has, or say why not. Nothing changes on a refusal."""
        if digest != expected_digest:
            return Refusal(reason="the approval is for other terms than the PO waiting (re-quoted or changed)")
        if any(s.person == self.person for s in signatures):
            return Refusal(
                reason=f"{self.person} has already approved this PO; a second signature must be someone else"
            )
        if len(signatures) >= self.signatures_needed(total):
            return Refusal(reason="this PO already has all the signatures it needs")
        granted = self.authority(total, supplier)
        if isinstance(granted, Refusal):
            return granted
        return (
            *signatures,
            Signature(person=granted.person, limit=granted.limit, acting_for=granted.acting_for, digest=digest, at=at),
        )


def _highest(person: Person) -> float:
    return max([person.limit, *person.supplier_limits.values()])


# --- the matrix file ----------------------------------------------------------------------------


class AuthorityFileError(ValueError):
    """The matrix file is unreadable or wrong; the message names the file and the place."""


def parse_authority(text: str, source: str = "people.toml") -> AuthorityMatrix:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise AuthorityFileError(f"{source}: not valid TOML: {e}") from None
    try:
        return AuthorityMatrix.model_validate(raw)
    except ValidationError as e:
        raise AuthorityFileError(f"{source}: {_explain(e, raw)}") from None


def load_authority(path: Path) -> AuthorityMatrix:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise AuthorityFileError(f"{path}: cannot read the authority matrix ({e.strerror or e})") from None
    return parse_authority(text, str(path))


def _explain(error: ValidationError, raw: object) -> str:
    """pydantic's errors in the file's words: `person 'ana': limit: must be a number, got 'lots'`."""
    lines: list[str] = []
    errors = error.errors(include_url=False)
    # A tuple whose item failed also reports itself as short: the item's own error says it all.
    inner = {item["loc"][0] for item in errors if len(item["loc"]) > 1}
    for item in errors:
        if item["type"] == "too_short" and len(item["loc"]) == 1 and item["loc"][0] in inner:
            continue
        loc = list(item["loc"])
        where: list[str] = []
        if len(loc) >= 2 and loc[0] in ("people", "delegations") and isinstance(loc[1], int):
            entry = _entry(raw, str(loc[0]), loc[1])
            if loc[0] == "people":
                where.append(f"person {entry.get('id', '#' + str(loc[1] + 1))!r}")
            else:
                where.append(f"delegation {entry.get('from', '?')} -> {entry.get('to', '?')}")
            loc = loc[2:]
        field = ".".join(str(part) for part in loc if part not in ("function-after",))
        if field:
            where.append(field.replace("from_", "from"))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] in ("float_parsing", "float_type"):
            message = f"must be a number, got {item.get('input')!r}"
        elif item["type"] == "string_pattern_mismatch" and field == "password_hash":
            message = "is not an argon2 hash (make one with `replenisher people hash-password`)"
        elif item["type"] == "extra_forbidden":
            message = "is not a setting this file knows (a typo?)"
        elif item["type"] == "literal_error" and "roles" in field:
            message = f"{item.get('input')!r} is not a role (approver, operator, viewer, admin)"
        lines.append(f"{': '.join(where)}: {message}" if where else message)
    return "; ".join(lines)


def _entry(raw: object, table: str, index: int) -> dict[str, object]:
    if isinstance(raw, dict):
        rows = raw.get(table)
        if isinstance(rows, list) and index < len(rows) and isinstance(rows[index], dict):
            return rows[index]
    return {}
