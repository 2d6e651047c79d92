"""Personal tokens: how a person proves who they are to the service from outside the console.

A decision on the internal ingress (the CLI, the console) names the person it is for; under an
authority matrix the service takes that name only with the person's own token, so reaching
the ingress is not enough to approve as someone else. A token is made by the console for the
signed-in person (or by an operator holding the key, `replenisher people issue-token`) and is
checked where the decision's standing is read, inside a journaled step:

    rpt_<payload>.<mac>     payload = base64url(JSON {"p": person, "iat": issued, "exp": expires, "n": nonce})
                            mac     = base64url(HMAC-SHA256(key, "rpt_" + payload))

The key (`REPLENISHER_PERSONAL_TOKEN_KEY`) is shared by the console and the service only. A
token is void once it expires, once its person leaves the matrix, or when the matrix sets
`tokens_not_before` for its person after the token was made (how a lost token is revoked).
Nothing here reads a clock or a file: the caller passes both.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replenisher.domain.documents import PersonId

PREFIX = "rpt_"
MAX_DAYS = 366.0
"""The longest a personal token may last: a year, renewed by making another."""
MIN_KEY_BYTES = 32


class TokenClaims(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    p: PersonId = Field(description="the person the token is for")
    iat: float = Field(description="when it was made (epoch seconds)")
    exp: float = Field(description="when it stops counting (epoch seconds)")
    n: str = Field(min_length=8, max_length=64, description="a nonce: two tokens made at once still differ")


class BadToken(ValueError):
    """Why a personal token does not count, in words a person reads."""


KEY_HEX_LENGTH = 64


def hex_key(text: str) -> bytes | None:
    """A key file's text as the key: 64 hex characters (surrounding blanks aside), else None. The
    personal token key and the door key (`inbound.stamp`) are both written so."""
    value = text.strip()
    if len(value) != KEY_HEX_LENGTH or any(c not in "0123456789abcdef" for c in value.lower()):
        return None
    return bytes.fromhex(value)


def parse_token_key(text: str) -> bytes:
    """The key from its file (`replenisher people new-token-key` writes one)."""
    key = hex_key(text)
    if key is None:
        raise BadToken(f"a personal token key is {KEY_HEX_LENGTH} hex characters")
    return key


def load_token_key(path: Path) -> bytes:
    try:
        return parse_token_key(path.read_text())
    except OSError as e:
        raise BadToken(f"cannot read the personal token key {path}: {e.strerror}") from None
    except BadToken as e:
        raise BadToken(f"{path}: {e}") from None


def new_token_key() -> str:
    return secrets.token_hex(KEY_HEX_LENGTH // 2)


def unverified_claims(token: str) -> TokenClaims | None:
    """What a token says of itself, unchecked (no key): for the CLI to name its person and expiry
    before it sends. Only the service, with the key, decides whether it counts."""
    if not token.startswith(PREFIX) or token.count(".") != 1:
        return None
    payload = token[len(PREFIX) :].split(".")[0]
    try:
        return TokenClaims.model_validate_json(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValidationError, ValueError, binascii.Error):
        return None


def issue(key: bytes, person: str, *, now: float, days: float) -> str:
    if len(key) < MIN_KEY_BYTES:
        raise BadToken(f"the personal token key is {len(key)} bytes; it needs at least {MIN_KEY_BYTES}")
    if not 0 < days <= MAX_DAYS:
        raise BadToken(f"a personal token lasts more than 0 and at most {MAX_DAYS:g} days, not {days:g}")
    claims = TokenClaims(p=person, iat=now, exp=now + days * 86_400, n=secrets.token_hex(8))
    payload = _b64(json.dumps(claims.model_dump(), separators=(",", ":"), sort_keys=True).encode())
    return f"{PREFIX}{payload}.{_mac(key, payload)}"


def verify(key: bytes, token: str, *, person: str, now: float, not_before: float | None = None) -> TokenClaims:
    """The token's claims if it is `person`'s, made with `key`, unexpired and not revoked; else `BadToken`."""
    if not token.startswith(PREFIX) or token.count(".") != 1:
        raise BadToken("it is not a personal token")
    payload, mac = token[len(PREFIX) :].split(".")
    if not hmac.compare_digest(mac.encode("utf-8", "surrogatepass"), _mac(key, payload).encode()):
        raise BadToken("the personal token is not one this service's key made")
    claims = unverified_claims(token)
    if claims is None:
        raise BadToken("the personal token is damaged")
    if claims.p != person:
        raise BadToken(f"the personal token is {claims.p}'s, not {person}'s")
    if now >= claims.exp:
        raise BadToken(f"{person}'s personal token has expired: make a new one in the console")
    if not_before is not None and claims.iat < not_before:
        raise BadToken(f"{person}'s personal token was revoked (made before the matrix's tokens_not_before)")
    return claims


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _mac(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, (PREFIX + payload).encode(), hashlib.sha256).digest())
