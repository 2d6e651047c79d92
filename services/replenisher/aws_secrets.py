"""The decider's key from AWS Secrets Manager or SSM Parameter Store, read once when the function starts.

`REPLENISHER_ANTHROPIC_KEY_SOURCE` names where the key is kept:

- `secretsmanager:<secret ARN or name>`: the secret's `SecretString`, either the key itself or
  a JSON object holding it under `ANTHROPIC_API_KEY`;
- `ssm:<parameter name>`: a (SecureString) parameter, decrypted.

The call goes through boto3, which Lambda's Python runtime ships (the deployment zip does not
bundle it; `pip install '.[aws]'` brings it elsewhere), with the function's own credentials
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, as Lambda sets them) taken
from the environment given, never from another source of credentials. It works during the
function's init phase, where the Parameters and Secrets extension is not ready yet.
`AWS_ENDPOINT_URL_SECRETS_MANAGER`, `AWS_ENDPOINT_URL_SSM` or `AWS_ENDPOINT_URL` move the
endpoint (VPC endpoints, tests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replenisher.inbound.signing import write_private
from replenisher.inbound.stamp import DOOR_KEY_ENV, DoorKeyError, parse_door_key

KEY_SOURCE_ENV = "REPLENISHER_ANTHROPIC_KEY_SOURCE"
KEY_ENV = "ANTHROPIC_API_KEY"
CONNECT_TIMEOUT = 3.0
READ_TIMEOUT = 10.0
ATTEMPTS = 3  # boto3's standard retries: throttling and 5xx answers, broken connections


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


@dataclass(frozen=True)
class _Store:
    service: str  # boto3's client name, the endpoint's prefix
    endpoint_env: str
    target: str  # the operation, as the AWS JSON protocol names it


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


def _client(store: _Store, region: str, env: Mapping[str, str]) -> Any:
    """A boto3 client for `store` with exactly these credentials and endpoint (none looked up elsewhere)."""
    # Imported here: a function without a key source starts without loading boto3.
    import boto3
    from botocore.config import Config

    credentials = Credentials.from_env(env)
    session = boto3.session.Session(
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        aws_session_token=credentials.session_token,
        region_name=region,
    )
    config = Config(
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        retries={"mode": "standard", "max_attempts": ATTEMPTS},
    )
    endpoint = env.get(store.endpoint_env) or env.get("AWS_ENDPOINT_URL") or None
    return session.client(store.service, region_name=region, endpoint_url=endpoint, config=config)


def fetch_key(source: str, env: Mapping[str, str], *, field: str = KEY_ENV) -> str:
    """The key kept at `source` (`secretsmanager:...` or `ssm:...`), read with one request;
    a secret holding a JSON object gives its `field` entry."""
    from botocore.exceptions import BotoCoreError, ClientError

    kind, _, name = source.partition(":")
    store = _STORES.get(kind)
    if store is None or not name:
        raise SecretFetchError(f"{KEY_SOURCE_ENV} must be secretsmanager:<secret> or ssm:<parameter>, not {source!r}")
    region = _region(name, env)
    try:
        client = _client(store, region, env)
    except BotoCoreError as exc:  # e.g. an AWS_PROFILE or AWS_CONFIG_FILE boto3 cannot use
        raise SecretFetchError(f"could not set up the {store.service} client for {source}: {exc}") from exc
    try:
        if kind == "secretsmanager":
            value = client.get_secret_value(SecretId=name).get("SecretString")
        else:
            value = (client.get_parameter(Name=name, WithDecryption=True).get("Parameter") or {}).get("Value")
    except ClientError as exc:
        error, status = exc.response.get("Error", {}), exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        reason = error.get("Message") or error.get("Code") or "no reason given"
        raise SecretFetchError(f"{store.target} for {name} answered {status}: {reason}") from None
    except BotoCoreError as exc:
        raise SecretFetchError(f"could not reach {client.meta.endpoint_url} for {source}: {exc}") from exc
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
