"""Personal tokens as pure rules: made with a key, they count only for their person, unexpired,
unrevoked, and unaltered."""

from __future__ import annotations

import pytest

from replenisher.domain.credentials import BadToken, issue, parse_token_key, unverified_claims, verify

KEY = bytes(range(32))
NOW = 1_800_000_000.0


def test_a_token_counts_for_its_person_until_it_expires() -> None:
    token = issue(KEY, "ana", now=NOW, days=30)
    claims = verify(KEY, token, person="ana", now=NOW + 29 * 86_400)
    assert (claims.p, claims.exp) == ("ana", NOW + 30 * 86_400)
    with pytest.raises(BadToken, match="ana's personal token has expired"):
        verify(KEY, token, person="ana", now=NOW + 30 * 86_400)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda t: t, "the personal token is ana's, not paul's"),
        (lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"), "not one this service's key made"),
        (lambda t: t.replace("rpt_", "rpt_x", 1), "not one this service's key made"),
        (lambda t: "hunter2", "it is not a personal token"),
        (lambda t: t + ".x", "it is not a personal token"),
    ],
)
def test_someone_elses_an_altered_or_no_token_is_refused(change: object, said: str) -> None:
    token = issue(KEY, "ana", now=NOW, days=1)
    assert callable(change)
    with pytest.raises(BadToken, match=said):
        verify(KEY, change(token), person="paul" if "paul" in said else "ana", now=NOW)


def test_another_keys_token_and_a_revoked_one_do_not_count() -> None:
    token = issue(bytes(32), "ana", now=NOW, days=1)
    with pytest.raises(BadToken, match="not one this service's key made"):
        verify(KEY, token, person="ana", now=NOW)
    mine = issue(KEY, "ana", now=NOW, days=1)
    assert verify(KEY, mine, person="ana", now=NOW + 10, not_before=NOW).p == "ana"
    with pytest.raises(BadToken, match="revoked"):
        verify(KEY, mine, person="ana", now=NOW + 10, not_before=NOW + 1)


def test_bad_keys_and_lengths_are_refused_and_claims_read_without_the_key() -> None:
    with pytest.raises(BadToken, match="at least 32"):
        issue(b"short", "ana", now=NOW, days=1)
    for days in (0, -1, 367, float("nan")):
        with pytest.raises(BadToken, match="at most 366 days"):
            issue(KEY, "ana", now=NOW, days=days)
    with pytest.raises(BadToken, match="64 hex characters"):
        parse_token_key("abc")
    assert parse_token_key("ab" * 32 + "\n") == bytes([0xAB] * 32)
    claims = unverified_claims(issue(KEY, "ana", now=NOW, days=1))
    assert claims is not None and claims.p == "ana"
    assert unverified_claims("rpt_!!.x") is None
