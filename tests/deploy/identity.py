"""Restate's request identity (scheme v1), as the tests need it.

restate-server signs every request to a service with its Ed25519 key: a JWT (EdDSA) in
`x-restate-jwt-v1`, with `x-restate-signature-scheme: v1`, the request path as audience
and a minute of validity either side of now. The key id, and what the service is
configured with, is `publickeyv1_` + the raw 32-byte public key in base58 (Bitcoin
alphabet). Here: key pairs for a test server, and tokens a forger might send.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def base58(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    digits = ""
    while number:
        number, digit = divmod(number, 58)
        digits = _BASE58[digit] + digits
    # Each leading zero byte is a leading "1".
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + digits


@dataclass(frozen=True)
class IdentityKey:
    private: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> IdentityKey:
        return cls(Ed25519PrivateKey.generate())

    @property
    def public_key(self) -> str:
        raw = self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return f"publickeyv1_{base58(raw)}"

    def write_pem(self, path: Path) -> Path:
        """PKCS#8 PEM, what `openssl genpkey -algorithm ed25519` writes and restate-server reads."""
        pem = self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        path.write_bytes(pem)
        path.chmod(0o600)
        return path

    def headers(self, audience: str, *, kid: str | None = None, now: float | None = None) -> dict[str, str]:
        """The headers of a request signed by this key for `audience` (the request path)."""
        issued = int(now if now is not None else time.time())
        header = {"typ": "JWT", "alg": "EdDSA", "kid": kid or self.public_key}
        claims = {"aud": audience, "nbf": issued - 60, "iat": issued, "exp": issued + 60}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = _b64url(self.private.sign(signing_input.encode()))
        return {"x-restate-signature-scheme": "v1", "x-restate-jwt-v1": f"{signing_input}.{signature}"}


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
