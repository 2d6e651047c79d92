"""Local passwords, for a console without an identity provider: argon2id, never the password itself."""

from __future__ import annotations

from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_HASHER = PasswordHasher()  # argon2id with the library's current recommended costs
MIN_LENGTH = 12


class WeakPassword(ValueError):
    pass


def hash_password(password: str) -> str:
    if len(password) < MIN_LENGTH:
        raise WeakPassword(f"a password needs at least {MIN_LENGTH} characters")
    return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True only for the right password; a wrong one, or a hash that is not argon2, is False."""
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@cache
def decoy_hash() -> str:
    """A hash of nothing anyone can type, checked when the person is unknown or has no password, so a
    wrong id costs the same time as a wrong password and the answer tells nothing about who exists.
    Made on first use, not at import: an argon2id hash is about 0.4 s of CPU, which every CLI command
    paid while this was a module constant. A console that signs people in makes it when it starts
    (`SignIn.__init__`), so its first refusal costs what every later one does."""
    return _HASHER.hash("\x00 not a password anyone can type \x00")
