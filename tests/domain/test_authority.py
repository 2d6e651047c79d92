"""The authority matrix: who may approve what, delegations, two signatures, and a file that says
what is wrong with it. Pure rules, judged on the docs' own example (docs/operating/people.md)."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from replenisher.domain.authority import (
    AuthorityFileError,
    AuthorityMatrix,
    Refusal,
    Signature,
    load_authority,
    order_digest,
    parse_authority,
)
from support import DOCS_DIR, doc_section

PAGE = "operating/people.md"
BEFORE_LEAVE, ON_LEAVE, BACK = date(2026, 12, 10), date(2026, 12, 28), date(2027, 1, 5)


def documented_text() -> str:
    [example] = re.findall(r"```toml\n(.*?)```", doc_section(PAGE, "## The matrix file"), re.S)
    return example


@pytest.fixture(scope="module")
def plant() -> AuthorityMatrix:
    return parse_authority(documented_text(), PAGE)


def digest(revision: int = 1, unit_price: float = 20.0) -> str:
    terms = {"po_number": "PO-SKU-1-1", "supplier": "bolts-inc", "quantity": 100, "quote_id": "Q-1"}
    return order_digest(**terms, revision=revision, unit_price=unit_price)


def sign(
    matrix: AuthorityMatrix,
    signatures: tuple[Signature, ...],
    who: str,
    total: float,
    day: date = BEFORE_LEAVE,
    given: str | None = None,
    expected: str | None = None,
) -> tuple[Signature, ...] | Refusal:
    terms = digest()
    return matrix.sign(
        signatures, who, total=total, supplier="bolts-inc", day=day, digest=given or terms,
        expected_digest=expected or terms, at=float(len(signatures)),
    )  # fmt: skip


# --- the docs' example and its table ------------------------------------------------------------


def test_the_pages_table_is_what_the_rules_say(plant: AuthorityMatrix) -> None:
    table = doc_section(PAGE, "## Who is asked, and who may sign")
    rows = re.findall(r"^\| ([\d,]+) \u00d7 ([\d.]+) from `([\w-]+)` \| ([\d,]+) \| ([\w, ]+) \| (\d) \|$", table, re.M)
    assert len(rows) == 4
    for quantity, price, supplier, total, asked, signatures in rows:
        order_total = int(quantity.replace(",", "")) * float(price)
        assert order_total == float(total.replace(",", ""))
        assert plant.approvers_for(order_total, supplier, BEFORE_LEAVE) == asked.split(", ")
        assert plant.signatures_needed(order_total) == int(signatures)


def test_a_delegation_routes_to_the_delegate_only_inside_its_dates(plant: AuthorityMatrix) -> None:
    assert plant.approvers_for(2000, "bolts-inc", ON_LEAVE) == ["ana", "sven", "dana"]
    for outside in (BEFORE_LEAVE, BACK, date(2026, 12, 20), date(2027, 1, 5)):
        assert plant.approvers_for(2000, "bolts-inc", outside) == ["paul", "sven", "dana"]
    # Both ends are inside.
    for edge in (date(2026, 12, 21), date(2027, 1, 4)):
        assert plant.approvers_for(2000, "bolts-inc", edge)[0] == "ana"


def test_the_delegate_signs_with_the_absent_persons_limit_and_says_so(plant: AuthorityMatrix) -> None:
    acting = plant.authority("ana", 2000, "bolts-inc", ON_LEAVE)
    assert not isinstance(acting, Refusal)
    assert (acting.person, acting.limit, acting.acting_for) == ("ana", 20000, "paul")
    # Her own limit covers a small order: she signs on her own authority, not Paul's.
    own = plant.authority("ana", 500, "bolts-inc", ON_LEAVE)
    assert not isinstance(own, Refusal) and own.acting_for is None and own.limit == 1000
    # Outside the dates she holds only her own.
    refused = plant.authority("ana", 2000, "bolts-inc", BACK)
    assert isinstance(refused, Refusal)
    assert refused.reason == "the order's total 2,000.00 is above ana's limit of 1,000.00"


def test_a_supplier_limit_replaces_the_general_one_for_that_supplier(plant: AuthorityMatrix) -> None:
    assert not isinstance(plant.authority("ana", 2400, "acme", BEFORE_LEAVE), Refusal)
    assert isinstance(plant.authority("ana", 2400, "bolts-inc", BEFORE_LEAVE), Refusal)
    assert isinstance(plant.authority("ana", 2600, "acme", BEFORE_LEAVE), Refusal)


def test_roles_are_separate_duties(plant: AuthorityMatrix) -> None:
    root, ines, paul = plant.person("root"), plant.person("ines"), plant.person("paul")
    assert root.may("administer") and not root.may("approve")
    assert ines.may("view") and not ines.may("approve") and not ines.may("operate")
    assert paul.may("approve") and paul.may("operate") and not paul.may("administer")
    for who in ("root", "ines"):
        refused = plant.authority(who, 1, "acme", BEFORE_LEAVE)
        assert isinstance(refused, Refusal) and refused.reason == f"{who} does not have the approver role"
    unknown = plant.authority("mallory", 1, "acme", BEFORE_LEAVE)
    assert isinstance(unknown, Refusal) and "not one of the people" in unknown.reason


# --- signatures -------------------------------------------------------------------------------------


def test_above_the_threshold_two_different_people_must_sign(plant: AuthorityMatrix) -> None:
    total, terms = 45_000.0, digest()
    first = sign(plant, (), "sven", total)
    assert isinstance(first, tuple) and [s.person for s in first] == ["sven"]
    assert not plant.approved(first, total, terms)
    again = sign(plant, first, "sven", total)
    assert isinstance(again, Refusal) and "already approved" in again.reason
    short = sign(plant, first, "paul", total)
    assert isinstance(short, Refusal) and "above paul's limit" in short.reason
    second = sign(plant, first, "dana", total)
    assert isinstance(second, tuple) and [s.person for s in second] == ["sven", "dana"]
    assert plant.approved(second, total, terms)
    assert isinstance(second, tuple)
    third = sign(plant.model_copy(update={"two_person_threshold": 40_000}), second, "paul", 30_000)
    assert isinstance(third, Refusal) and third.reason == "this PO already has all the signatures it needs"


def test_one_person_counts_once_whoever_they_act_for(plant: AuthorityMatrix) -> None:
    """Ana acting for Paul and Ana on her own are one person, not two signatures."""
    wide = plant.model_copy(update={"two_person_threshold": 500})
    terms = digest()
    first = sign(wide, (), "ana", 900, day=ON_LEAVE)
    assert isinstance(first, tuple)
    again = sign(wide, first, "ana", 900, day=ON_LEAVE)
    assert isinstance(again, Refusal)
    forged = (*first, first[0].model_copy(update={"acting_for": "paul"}))
    assert not wide.approved(forged, 900, terms)


def test_an_approval_for_other_terms_approves_nothing(plant: AuthorityMatrix) -> None:
    old, requoted = digest(revision=1), digest(revision=2)
    assert old != requoted
    assert digest(unit_price=20.0) != digest(unit_price=20.01)
    refused = sign(plant, (), "paul", 2000, given=old, expected=requoted)
    assert isinstance(refused, Refusal) and "other terms" in refused.reason
    signed = (Signature(person="paul", limit=20000, digest=old, at=1.0),)
    assert plant.approved(signed, 2000, old)
    assert not plant.approved(signed, 2000, requoted)
    # A signature whose limit did not cover the total never counts, however it got there.
    assert not plant.approved((Signature(person="ana", limit=1000, digest=old, at=1.0),), 2000, old)


# --- the file's mistakes -------------------------------------------------------------------------------

BASE = """
[[people]]
id = "ana"
name = "Ana"
email = "ana@plant.example"
roles = ["approver"]
limit = 1000
"""


def mistake(extra: str, base: str = BASE) -> str:
    with pytest.raises(AuthorityFileError) as caught:
        parse_authority(base + extra, "people.toml")
    return str(caught.value)


def test_a_limit_that_is_not_a_number_is_named_with_its_person() -> None:
    text = BASE.replace("limit = 1000", 'limit = "lots"')
    with pytest.raises(AuthorityFileError) as caught:
        parse_authority(text, "people.toml")
    assert str(caught.value) == "people.toml: person 'ana': limit: must be a number, got 'lots'"


def person(who: str, roles: str = '["viewer"]', extra: str = "", email: str = "") -> str:
    address = email or f"{who}@plant.example"
    return f'[[people]]\nid = "{who}"\nname = "{who}"\nemail = "{address}"\nroles = {roles}\n{extra}'


def delegation(of: str, to: str, starts: str = "2026-12-01", ends: str = "2026-12-02") -> str:
    return f'[[delegations]]\nfrom = "{of}"\nto = "{to}"\nstarts = {starts}\nends = {ends}\n'


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (person("ana"), "listed more than once"),
        (person("bo", email="ANA@plant.example"), "more than one person"),
        (person("bo", roles='["boss"]'), "'boss' is not a role"),
        (person("bo", extra="limit = 5\n"), "person 'bo': has a limit but not the `approver` role"),
        (person("Bo Smith"), "person 'Bo Smith': id"),
        (person("bo", email="not-an-email"), "person 'bo': email"),
        ("two_person_treshold = 5\n", "two_person_treshold: is not a setting this file knows"),
        (delegation("ana", "zed"), "zed is not one of the people"),
        (delegation("ana", "ana"), "cannot delegate to themselves"),
        (person("bo") + delegation("ana", "bo", "2026-12-05", "2026-12-01"), "is before starts"),
    ],
)
def test_each_mistake_is_refused_with_its_reason(extra: str, says: str) -> None:
    # TOML puts top-level keys before the first table: a top-level mistake goes first.
    base, text = (BASE, extra) if extra.startswith("[[") else ("", extra + BASE)
    message = mistake(text, base)
    assert message.startswith("people.toml: ")
    assert says in message


def test_delegations_that_overlap_or_chain_are_refused() -> None:
    team = BASE + "".join(person(who, '["approver"]', "limit = 10\n") for who in ("bo", "cy"))
    first = delegation("ana", "bo", "2026-12-01", "2026-12-10")
    twice = first + delegation("ana", "cy", "2026-12-10", "2026-12-20")
    assert "delegates twice over the same days" in mistake(twice, team)
    chain = first + delegation("bo", "cy", "2026-12-05", "2026-12-20")
    assert "not followed in chains" in mistake(chain, team)
    # Back to back, not overlapping: fine.
    fine = first + delegation("ana", "cy", "2026-12-11", "2026-12-20")
    matrix = parse_authority(team + fine)
    assert matrix.approvers_for(5, "acme", date(2026, 12, 11)) == ["bo", "cy"]


def test_a_matrix_no_one_could_use_is_refused() -> None:
    nobody = BASE.replace('roles = ["approver"]\nlimit = 1000', 'roles = ["viewer"]')
    assert "no one has the `approver` role" in mistake("", nobody)
    assert "only ana may approve above it" in mistake("", "two_person_threshold = 500\n" + BASE)
    assert "no one may approve above it" in mistake("", "two_person_threshold = 5000\n" + BASE)


def test_broken_toml_and_a_missing_file_say_where(tmp_path: Path) -> None:
    assert mistake("[[people]\n").startswith("people.toml: not valid TOML: ")
    with pytest.raises(AuthorityFileError, match=r"missing\.toml: cannot read the authority matrix"):
        load_authority(tmp_path / "missing.toml")
    good = tmp_path / "people.toml"
    good.write_text(documented_text())
    assert load_authority(good).signatures_needed(20_000.01) == 2


def test_the_page_is_in_the_sites_nav() -> None:
    assert f"operating/{Path(PAGE).name}" in (DOCS_DIR.parent / "mkdocs.yml").read_text()


def test_an_edit_of_the_matrix_is_said_in_an_auditors_words(plant: AuthorityMatrix) -> None:
    from replenisher.domain.authority import changes_between

    text = documented_text()
    edited = parse_authority(
        text.replace("limit = 1000 ", "limit = 1500 ").replace('roles = ["viewer"]', 'roles = ["viewer", "operator"]')
        .replace("two_person_threshold = 20000", "two_person_threshold = 25000")
        .replace('to = "ana"', 'to = "sven"')
    )  # fmt: skip
    assert changes_between(plant, edited) == [
        "ana: limit 1,000.00 -> 1,500.00",
        "ines: roles viewer -> viewer, operator",
        "two-person threshold 20000.0 -> 25000.0",
        "delegation added: paul -> sven 2026-12-21..2027-01-04",
        "delegation removed: paul -> ana 2026-12-21..2027-01-04",
    ]
    assert changes_between(plant, plant) == []
