"""The decider's key from AWS Secrets Manager or SSM Parameter Store, read once when the function starts.

`REPLENISHER_ANTHROPIC_KEY_SOURCE` names where the key is kept:

- `secretsmanager:<secret ARN or name>`: the secret's `SecretString`, either the key itself or
  a JSON object holding it under `ANTHROPIC_API_KEY`;
- `ssm:<parameter name>`: a (SecureString) parameter, decrypted.

The call is a plain HTTPS request signed with AWS Signature Version 4 from the function's own
credentials (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, as Lambda sets
them), so the deployment zip needs no boto3, and it works during the function's init phase,
where the Parameters and Secrets extension is not ready yet. `AWS_ENDPOINT_URL_SECRETS_MANAGER`,
`AWS_ENDPOINT_URL_SSM` or `AWS_ENDPOINT_URL` move the endpoint (VPC endpoints, tests).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import httpx

from replenisher.inbound.signing import write_private
from replenisher.inbound.stamp import DOOR_KEY_ENV, DoorKeyError, parse_door_key

KEY_SOURCE_ENV = "REPLENISHER_ANTHROPIC_KEY_SOURCE"
KEY_ENV = "ANTHROPIC_API_KEY"
FETCH_TIMEOUT = httpx.Timeout(10.0, connect=3.0)


class SecretFetchError(RuntimeError):
    """The key could not be read; the message never holds the secret."""


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    session_token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Credentials:
        try:
            return cls(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env.get("AWS_SESSION_TOKEN") or None)
        except KeyError as missing:
            raise SecretFetchError(f"no AWS credentials in the environment ({missing.args[0]} is not set)") from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str,
    when: datetime,
) -> dict[str, str]:
    """`headers` plus `host`, `x-amz-date`, the session token and `authorization` (SigV4, all headers signed)."""
    parts = urlsplit(url)
    amz_date = when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    signed = {k.lower(): " ".join(v.split()) for k, v in headers.items()}
    signed.setdefault("host", parts.netloc)
    signed["x-amz-date"] = amz_date
    if credentials.session_token:
        signed["x-amz-security-token"] = credentials.session_token
    names = sorted(signed)
    query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(parse_qsl(parts.query, True))
    )
    canonical = "\n".join(
        [
            method,
            quote(parts.path or "/", safe="/-_.~"),
            query,
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            _sha256(body),
        ]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{_sha256(canonical.encode())}"
    key = ("AWS4" + credentials.secret_key).encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return signed


@dataclass(frozen=True)
class _Store:
    service: str  # SigV4 signing name and endpoint prefix
    endpoint_env: str
    target: str


_STORES = {
    "secretsmanager": _Store("secretsmanager", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "secretsmanager.GetSecretValue"),
    "ssm": _Store("ssm", "AWS_ENDPOINT_URL_SSM", "AmazonSSM.GetParameter"),
}


def _region(name: str, env: Mapping[str, str]) -> str:
    if name.startswith("arn:"):
        return name.split(":")[3]  # arn:partition:service:REGION:account:...
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region:
        raise SecretFetchError("AWS_REGION is not set (Lambda sets it)")
    return region


def fetch_key(source: str, env: Mapping[str, str], *, now: datetime | None = None, field: str = KEY_ENV) -> str:
    """The key kept at `source` (`secretsmanager:...` or `ssm:...`), read with one signed request;
    a secret holding a JSON object gives its `field` entry."""
    kind, _, name = source.partition(":")
    store = _STORES.get(kind)
    if store is None or not name:
        raise SecretFetchError(f"{KEY_SOURCE_ENV} must be secretsmanager:<secret> or ssm:<parameter>, not {source!r}")
    region = _region(name, env)
    endpoint = (
        env.get(store.endpoint_env) or env.get("AWS_ENDPOINT_URL") or f"https://{store.service}.{region}.amazonaws.com"
    )
    url = endpoint.rstrip("/") + "/"
    payload = {"SecretId": name} if kind == "secretsmanager" else {"Name": name, "WithDecryption": True}
    body = json.dumps(payload).encode()
    headers = sign(
        "POST",
        url,
        {"content-type": "application/x-amz-json-1.1", "x-amz-target": store.target},
        body,
        Credentials.from_env(env),
        region,
        store.service,
        now or datetime.now(UTC),
    )
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=FETCH_TIMEOUT)
    except httpx.HTTPError as exc:
        raise SecretFetchError(f"could not reach {url} for {source}: {exc}") from exc
    try:
        answer = response.json()
    except ValueError:
        answer = {}
    if response.status_code != 200:
        reason = answer.get("message") or answer.get("Message") or answer.get("__type") or response.reason_phrase
        raise SecretFetchError(f"{store.target} for {name} answered {response.status_code}: {reason}")
    value = answer.get("SecretString") if kind == "secretsmanager" else (answer.get("Parameter") or {}).get("Value")
    if not isinstance(value, str) or not value.strip():
        raise SecretFetchError(f"{source} holds no text value")
    return _key_in(value.strip(), field)


def _key_in(value: str, field: str = KEY_ENV) -> str:
    # A secret made in the console as key/value pairs is a JSON object.
    if value.startswith("{"):
        try:
            pairs = json.loads(value)
        except ValueError:
            return value
        key = pairs.get(field) if isinstance(pairs, dict) else None
        if not isinstance(key, str) or not key:
            raise SecretFetchError(f"the secret is a JSON object without a {field} entry")
        return key
    return value


def load_key_into_env(env: MutableMapping[str, str]) -> bool:
    """With a key source configured, fetch the key and set `ANTHROPIC_API_KEY`; whether it did."""
    source = env.get(KEY_SOURCE_ENV, "").strip()
    if not source:
        return False
    env[KEY_ENV] = fetch_key(source, env)
    return True


DOOR_KEY_SOURCE_ENV = "REPLENISHER_DOOR_KEY_SOURCE"
DOOR_KEY_FIELD = "REPLENISHER_DOOR_KEY"


def load_door_key_into_env(env: MutableMapping[str, str], directory: Path) -> bool:
    """With `REPLENISHER_DOOR_KEY_SOURCE` set, fetch the inbound endpoint's door key, write it
    to a file of its own in `directory` (0600) and point `REPLENISHER_DOOR_KEY_FILE` at it."""
    source = env.get(DOOR_KEY_SOURCE_ENV, "").strip()
    if not source:
        return False
    value = fetch_key(source, env, field=DOOR_KEY_FIELD)
    try:
        parse_door_key(value)
    except DoorKeyError as e:
        raise SecretFetchError(f"{source} holds no door key: {e}") from None
    path = directory / "replenisher-door-key"
    write_private(path, value)
    env[DOOR_KEY_ENV] = str(path)
    return True
