"""The people the sign-in tests sign in as: an authority matrix with argon2 passwords for two of them."""

from __future__ import annotations

from replenisher.identity.passwords import hash_password

PASSWORDS = {
    "ana": "ana's long passphrase",
    "vic": "vic's long passphrase",
    "paul": "paul's long passphrase",
    "dana": "dana's long passphrase",  # a director, added by the tests that need a second signature
}
SESSION_SECRET = "the-sign-in-tests-session-secret-0123456789"


def people_toml(with_passwords: tuple[str, ...] = ("ana", "vic")) -> str:
    """Ana, a buyer (up to 1,000); Vic, a viewer; Paul, the plant manager (up to 20,000), who signs in
    with his company account unless given a password here."""
    hashes = {who: hash_password(PASSWORDS[who]) for who in with_passwords}
    line = {who: f'password_hash = "{h}"' for who, h in hashes.items()}
    return f"""
[[people]]
id = "ana"
name = "Ana Lindqvist"
email = "ana@plant.example"
roles = ["approver"]
limit = 1000
{line.get("ana", "")}

[[people]]
id = "vic"
name = "Vic Auditor"
email = "vic@plant.example"
roles = ["viewer"]
{line.get("vic", "")}

[[people]]
id = "paul"
name = "Paul Meyer"
email = "paul@plant.example"
roles = ["approver"]
limit = 20000
{line.get("paul", "")}
"""
