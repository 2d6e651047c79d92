"""The inbound endpoint's pure parts: signatures, the replay memory, who may send what."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from replenisher.domain.documents import Sender
from replenisher.domain.parties import refusal
from replenisher.inbound.replay import SeenSignatures
from replenisher.inbound.signing import (
    SUPPLIER_MASTER,
    SecretsError,
    load_secrets,
    new_secrets,
    parse_secrets,
    secret_for,
    signature,
    signed_headers,
    verify,
    write_secrets,
)

SECRET = "s" * 40


def test_a_signature_covers_timestamp_party_path_key_and_body() -> None:
    good = signature(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", "k-1")
    assert good.startswith("v2=") and verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", good, "k-1")
    for changed in (
        ("101", "warehouse", "/messages/SKU-1", b"{}", "k-1"),
        ("100", "manager", "/messages/SKU-1", b"{}", "k-1"),
        ("100", "warehouse", "/messages/SKU-2", b"{}", "k-1"),
        ("100", "warehouse", "/messages/SKU-1", b"{ }", "k-1"),
        ("100", "warehouse", "/messages/SKU-1", b"{}", "k-2"),
        ("100", "warehouse", "/messages/SKU-1", b"{}", None),
        # The newline ends the key: a key cannot borrow the body's first bytes.
        ("100", "warehouse", "/messages/SKU-1", b"1\n{}", "k-"),
    ):
        assert not verify(SECRET, *changed[:4], good, changed[4])
    assert not verify("t" * 40, "100", "warehouse", "/messages/SKU-1", b"{}", good, "k-1")
    assert not verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", "v2=é", "k-1")
    assert not verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", "v3=" + good[3:], "k-1")
    unkeyed = signature(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}")
    assert verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", unkeyed)
    assert not verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", unkeyed, "k-1")
    headers = signed_headers(SECRET, "manager", "/messages/X", b"b", now=1234.9, key="k-1")
    assert headers["x-replenisher-timestamp"] == "1234" and headers["x-replenisher-party"] == "manager"
    assert headers["idempotency-key"] == "k-1"
    assert "idempotency-key" not in signed_headers(SECRET, "manager", "/messages/X", b"b", now=1234.9)


def test_a_v1_signature_still_verifies_but_never_for_a_request_with_a_key() -> None:
    """v1 covers no key: whoever captured a v1 request could set any key and be delivered again."""
    old = signature(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", version="v1")
    assert old.startswith("v1=") and verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", old)
    assert not verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{ }", old)
    assert not verify(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", old, "any-key")
    with pytest.raises(ValueError, match="v2"):
        signature(SECRET, "100", "warehouse", "/messages/SKU-1", b"{}", "k-1", version="v1")


def test_supplier_secrets_derive_from_the_master_and_one_cannot_sign_for_another() -> None:
    secrets = new_secrets()
    acme, bolt = secret_for(secrets, "supplier:acme"), secret_for(secrets, "supplier:bolt")
    assert acme and bolt and acme != bolt and secrets[SUPPLIER_MASTER] not in (acme, bolt)
    assert secret_for(secrets, "supplier:acme") == acme, "derivation is stable"
    assert secret_for(secrets, SUPPLIER_MASTER) is None and secret_for(secrets, "operator") is None
    assert secret_for(secrets, "supplier:a/b") is None
    assert secret_for({**secrets, "supplier:acme": "x" * 40}, "supplier:acme") == "x" * 40


def test_the_secrets_file_is_private_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "secrets.json"
    write_secrets(path, new_secrets())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert set(load_secrets(path)) == {"manager", "warehouse", SUPPLIER_MASTER}
    for bad, reason in (
        ('{"manager": "short"}', "shorter"),
        ('{"root": "' + SECRET + '"}', "not a party"),
        ('{"operator": "' + SECRET + '"}', "internal ingress"),
        ("[1]", "JSON object"),
    ):
        with pytest.raises(SecretsError, match=reason):
            parse_secrets(bad)
    with pytest.raises(SecretsError, match="cannot read"):
        load_secrets(tmp_path / "missing.json")


def test_a_signature_is_accepted_once_within_the_window_and_memory_stays_bounded() -> None:
    seen = SeenSignatures(window_seconds=10, limit=3)
    assert seen.first_time("a", now=0) and not seen.first_time("a", now=5)
    assert seen.first_time("a", now=100), "long after the window it is the timestamp check that refuses"
    seen.forget("a")
    assert seen.first_time("a", now=101), "a request that did not get through may be sent again"
    for n in range(10):
        seen.first_time(f"s{n}", now=101)
    assert len(seen._expiry) <= 3


@pytest.mark.parametrize(
    ("party", "event", "payload", "refused"),
    [
        ("manager", "approval", {}, False),
        ("warehouse", "goods", {}, False),
        ("supplier:acme", "supplier-reply", {"supplier": "acme"}, False),
        ("supplier:acme", "supplier-reply", {"supplier": "bolt"}, True),
        ("supplier:acme", "approval", {}, True),
        ("supplier:acme", "goods", {}, True),
        ("warehouse", "approval", {}, True),
        ("manager", "goods", {}, True),
        ("operator", "approval", {}, True),
    ],
)
def test_each_party_may_send_only_its_own_kind_of_message(
    party: str, event: str, payload: dict[str, str], refused: bool
) -> None:
    assert (refusal(Sender(party=party), event, payload) is not None) is refused  # type: ignore[arg-type]
