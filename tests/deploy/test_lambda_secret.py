"""The Lambda function reads the decider's key from Secrets Manager or Parameter Store when it starts.

AWS itself cannot run here. What runs: the fetch, through boto3, against a stand-in for the two
AWS APIs over real HTTP on loopback (boto3's `endpoint_url` pointed at it), which speaks their
JSON protocol and checks each request's target and Signature Version 4 as AWS would
(recomputed with the credentials it expects, so a request signed with other credentials or
altered after signing is refused; the stand-in's own signer is checked against AWS's published
test vectors); and the handler, imported from the unpacked deployment zip (`python -I -S`:
nothing from this machine's site-packages) beside a stand-in for the Lambda runtime's own
packages (boto3 and what it needs, as the python3.12 runtime ships them), reading the key at
start through it. Not run: the real AWS endpoints and IAM (whether the template's policy lets
the role read the secret), which only a deployed stack shows.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from cfnlint.decode import decode

from replenisher.aws_secrets import Credentials, SecretFetchError, fetch_key
from replenisher.stack.ports import free_port

from .stacks import LAMBDA_DIR, lambda_runtime, unpack

# The AWS Signature Version 4 test suite's credentials, time, region and service.
SUITE_CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_TIME = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
CREDENTIALS = Credentials("ASIATESTKEYID", "test/secret+key", "session-token-of-the-function")
KEY = "sk-ant-test-0123456789"
SECRET_ARN = "arn:aws:secretsmanager:eu-central-1:111122223333:secret:replenisher/anthropic-AbCdEf"
PARAMETER = "/replenisher/anthropic-key"


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
    """The stand-in's check, as AWS computes it: `headers` plus `host`, `x-amz-date`, the session
    token and `authorization` (SigV4 over every header given)."""
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
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = ("AWS4" + credentials.secret_key).encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return signed


@pytest.mark.parametrize(
    ("method", "url", "signature"),
    [
        ("GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("POST", "https://example.amazonaws.com/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        (
            "GET",
            "https://example.amazonaws.com/?Param2=value2&Param1=value1",
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        ),
    ],
    ids=["get-vanilla", "post-vanilla", "get-vanilla-query-order-key-case"],
)
def test_the_stand_ins_signature_check_matches_the_sigv4_test_suite(method: str, url: str, signature: str) -> None:
    headers = sign(method, url, {}, b"", SUITE_CREDENTIALS, "us-east-1", "service", SUITE_TIME)
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={signature}"
    )


# --- a stand-in for Secrets Manager and Parameter Store over HTTP --------------------------


@dataclass
class StandIn:
    url: str
    secrets: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    seen: list[dict[str, Any]] = field(default_factory=list)


def _answer(stand_in: StandIn, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    auth = headers.pop("authorization", "")
    region, service = auth.split("Credential=", 1)[1].split("/")[2:4] if "Credential=" in auth else ("", "")
    when = datetime.strptime(headers.get("x-amz-date", "19700101T000000Z"), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    expected = sign("POST", stand_in.url + "/", headers, body, CREDENTIALS, region, service, when)["authorization"]
    signed = auth.split("SignedHeaders=", 1)[-1].split(",", 1)[0].split(";")
    if auth != expected or not {"x-amz-target", "x-amz-security-token", "host"} <= set(signed):
        return 403, {"__type": "InvalidSignatureException", "message": "The request signature does not match."}
    request = json.loads(body)
    target = headers.get("x-amz-target")
    if target == "secretsmanager.GetSecretValue" and service == "secretsmanager":
        if request["SecretId"] in stand_in.secrets:
            return 200, {"ARN": request["SecretId"], "SecretString": stand_in.secrets[request["SecretId"]]}
        return 400, {"__type": "ResourceNotFoundException", "message": "Secrets Manager can't find the secret."}
    if target == "AmazonSSM.GetParameter" and service == "ssm" and request.get("WithDecryption") is True:
        if request["Name"] in stand_in.parameters:
            return 200, {"Parameter": {"Name": request["Name"], "Value": stand_in.parameters[request["Name"]]}}
        return 400, {"__type": "ParameterNotFound", "message": f"parameter {request['Name']} not found"}
    return 400, {"__type": "UnknownOperationException", "message": f"{target} on {service}"}


@pytest.fixture
def aws() -> Iterator[StandIn]:
    stand_in = StandIn(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            stand_in.seen.append({"target": headers.get("x-amz-target"), "body": json.loads(body)})
            # Only what the client signed takes part in the check, as AWS does.
            signed = headers.get("authorization", "").split("SignedHeaders=", 1)[-1].split(",", 1)[0].split(";")
            status, answer = _answer(
                stand_in, {k: v for k, v in headers.items() if k in [*signed, "authorization"]}, body
            )
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/x-amz-json-1.1")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _env(aws: StandIn, credentials: Credentials = CREDENTIALS) -> dict[str, str]:
    return {
        "AWS_REGION": "eu-central-1",
        "AWS_ACCESS_KEY_ID": credentials.access_key,
        "AWS_SECRET_ACCESS_KEY": credentials.secret_key,
        "AWS_SESSION_TOKEN": credentials.session_token or "",
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": aws.url,
        "AWS_ENDPOINT_URL_SSM": aws.url,
    }


def test_the_key_comes_from_a_secret_or_a_parameter(aws: StandIn) -> None:
    aws.secrets[SECRET_ARN] = KEY
    aws.secrets["replenisher/as-json"] = json.dumps({"ANTHROPIC_API_KEY": KEY, "other": "x"})
    aws.parameters[PARAMETER] = KEY
    assert fetch_key(f"secretsmanager:{SECRET_ARN}", _env(aws)) == KEY
    assert fetch_key("secretsmanager:replenisher/as-json", _env(aws)) == KEY
    assert fetch_key(f"ssm:{PARAMETER}", _env(aws)) == KEY
    assert [s["target"] for s in aws.seen] == [
        "secretsmanager.GetSecretValue",
        "secretsmanager.GetSecretValue",
        "AmazonSSM.GetParameter",
    ]


def test_refusals_are_reported_without_the_secret(aws: StandIn) -> None:
    aws.parameters[PARAMETER] = KEY
    with pytest.raises(SecretFetchError, match="answered 400: parameter /replenisher/nonesuch not found") as missing:
        fetch_key("ssm:/replenisher/nonesuch", _env(aws))
    # Positive control for the stand-in's signature check: other credentials are refused.
    other = Credentials("ASIATESTKEYID", "another-secret", "session-token-of-the-function")
    with pytest.raises(SecretFetchError, match="403: The request signature does not match") as forged:
        fetch_key(f"ssm:{PARAMETER}", _env(aws, other))
    assert KEY not in str(missing.value) + str(forged.value)
    with pytest.raises(SecretFetchError, match="secretsmanager:<secret> or ssm:<parameter>"):
        fetch_key("vault:x", _env(aws))
    with pytest.raises(SecretFetchError, match="AWS_SECRET_ACCESS_KEY"):
        fetch_key(f"ssm:{PARAMETER}", {"AWS_REGION": "eu-central-1", "AWS_ACCESS_KEY_ID": "x"})


def test_an_endpoint_that_does_not_answer_is_named_with_the_source() -> None:
    port = free_port()  # nothing listens there
    env = {"AWS_REGION": "eu-central-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
    with pytest.raises(SecretFetchError, match=f"could not reach http://127.0.0.1:{port} for ssm:{PARAMETER}: "):
        fetch_key(f"ssm:{PARAMETER}", {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})


# --- the function as deployed ---------------------------------------------------------------


@pytest.fixture(scope="module")
def code_dir(local_lambda_zip: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(Path(local_lambda_zip["zip"]), tmp_path_factory.mktemp("lambda-code"))


START = """
import os, sys
sys.path.insert(0, ".")
sys.path.append(os.environ["TEST_LAMBDA_RUNTIME"])  # Lambda's /var/runtime: boto3 and what it needs
import replenisher.durable.lambda_handler  # the function's init: keys into its environment, app bootstrapped
from replenisher.config import load_settings
s = load_settings()  # the settings the init built the app from: the environment as it left it
print(s.decider, s.anthropic_api_key.get_secret_value() if s.anthropic_api_key else None)
print(s.door_key.get_secret_value().hex() if s.door_key else None)
"""


def _start_function(code: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    lambda_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TEST_LAMBDA_RUNTIME": str(lambda_runtime(code.parent / "lambda-runtime")),
        "AWS_LAMBDA_FUNCTION_NAME": "replenisher",
        "LAMBDA_TASK_ROOT": str(code),
        "REPLENISHER_DECIDER": "claude",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", START], cwd=code, env=lambda_env, capture_output=True, text=True, timeout=120
    )


def test_the_function_reads_its_key_at_start_from_the_zip_alone(aws: StandIn, code_dir: Path) -> None:
    assert not (code_dir / "boto3").exists() and not (code_dir / "botocore").exists()
    aws.parameters[PARAMETER] = KEY
    started = _start_function(code_dir, {**_env(aws), "REPLENISHER_ANTHROPIC_KEY_SOURCE": f"ssm:{PARAMETER}"})
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["claude", KEY, "None"]
    assert [s["body"] for s in aws.seen] == [{"Name": PARAMETER, "WithDecryption": True}]


DOOR_PARAMETER = "/replenisher/door-key"
DOOR_KEY = "ab" * 32


def test_the_function_reads_the_door_key_at_start_and_refuses_a_value_that_is_not_one(
    aws: StandIn, code_dir: Path
) -> None:
    aws.parameters[PARAMETER] = KEY
    aws.parameters[DOOR_PARAMETER] = DOOR_KEY
    sources = {
        "REPLENISHER_ANTHROPIC_KEY_SOURCE": f"ssm:{PARAMETER}",
        "REPLENISHER_DOOR_KEY_SOURCE": f"ssm:{DOOR_PARAMETER}",
    }
    started = _start_function(code_dir, {**_env(aws), **sources})
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["claude", KEY, DOOR_KEY]
    aws.parameters[DOOR_PARAMETER] = "not-a-key"
    refused = _start_function(code_dir, {**_env(aws), **sources})
    assert refused.returncode != 0
    assert "the inbound endpoint's door key could not be read at start" in refused.stderr
    assert "holds no door key" in refused.stderr and "not-a-key" not in refused.stderr


def test_a_function_that_cannot_read_its_key_fails_its_start(aws: StandIn, code_dir: Path) -> None:
    started = _start_function(code_dir, {**_env(aws), "REPLENISHER_ANTHROPIC_KEY_SOURCE": f"ssm:{PARAMETER}"})
    assert started.returncode != 0
    assert "the decider's key could not be read at start" in started.stderr
    assert f"parameter {PARAMETER} not found" in started.stderr
    # And without a source, Claude without a key refuses to start, as on hypercorn.
    unset = _start_function(code_dir, _env(aws))
    assert unset.returncode != 0 and "needs ANTHROPIC_API_KEY" in unset.stderr


def test_the_template_wires_the_key_source_and_may_read_only_that_secret() -> None:
    template, matches = decode(str(LAMBDA_DIR / "template.yaml"))
    assert not matches, matches
    function = template["Resources"]["Function"]["Properties"]
    variables = function["Environment"]["Variables"]
    assert "ANTHROPIC_API_KEY" not in variables, "the key never sits in the function's configuration"
    assert "REPLENISHER_ANTHROPIC_KEY_SOURCE" in variables
    policy = json.dumps(template["Resources"]["FunctionRole"]["Properties"]["Policies"])
    assert '"Action": "secretsmanager:GetSecretValue", "Resource": {"Ref": "AnthropicKeySecretArn"}' in policy
    assert '"Action": "ssm:GetParameter"' in policy and "parameter${AnthropicKeyParameterName}" in policy
    assert "ClaudeNeedsItsKey" in template["Rules"]
    assert "REPLENISHER_DOOR_KEY_SOURCE" in variables and "REPLENISHER_DOOR_KEY" not in variables
    assert "parameter${DoorKeyParameterName}" in policy
