"""A stand-in for AWS Lambda on loopback: Restate's HTTP request in, a Lambda invocation, HTTP out.

    python local_lambda.py --code DIR --handler replenisher.durable.lambda_handler.handler --port P

Restate calls a Lambda function through the Lambda Invoke API with an API-Gateway-shaped
payload (`path`, `httpMethod`, `headers`, base64 `body`, `isBase64Encoded`) and reads back
`statusCode`, `headers` and a base64 `body`. AWS cannot run here, so Restate is registered
against this HTTP server instead (HTTP/1.1, request/response), which builds exactly that
payload from each request, calls the handler, and turns its answer back into the HTTP
response. Like Lambda it:

- loads the function from the unpacked deployment zip only (run it with `python -I -S`,
  so nothing from this machine's site-packages leaks in), with the code dir as the
  working directory and Lambda's environment variables set; `--runtime DIR` stands for the
  packages the runtime itself ships (boto3 and what it needs), on the path after the code;
- runs each execution environment as its own process that serves one invocation at a
  time (`--environments N` of them, forked after the socket is bound);
- keeps an environment's memory between invocations (warm starts).

Every invocation is appended to `--invocations` as one JSON line (environment pid, path,
status, milliseconds), so a test can see that a run was invoked, suspended and invoked again.
Standard library only: the code dir holds everything else.
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import os
import signal
import socket
import socketserver
import sys
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

_SKIP_RESPONSE_HEADERS = {"content-length", "transfer-encoding", "connection"}


class LambdaContext:
    """The attributes of Lambda's context object that handlers commonly read."""

    def __init__(self, function_name: str, timeout_s: float) -> None:
        self.function_name = function_name
        self.function_version = "1"
        self.invoked_function_arn = f"arn:aws:lambda:eu-central-1:000000000000:function:{function_name}:1"
        self.memory_limit_in_mb = "512"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class Invoker(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Environment

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _invoke(self) -> None:
        started = time.monotonic()
        body = self._body()
        event = {
            "path": self.path.split("?", 1)[0],
            "httpMethod": self.command,
            "headers": {name.lower(): value for name, value in self.headers.items()},
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }
        # Through JSON both ways, as the Invoke API carries it.
        event = json.loads(json.dumps(event))
        try:
            result: dict[str, Any] = json.loads(json.dumps(self.server.handler(event, self.server.context())))
            status = int(result["statusCode"])
            raw = result.get("body") or ""
            payload = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
            headers = {
                k: v for k, v in (result.get("headers") or {}).items() if k.lower() not in _SKIP_RESPONSE_HEADERS
            }
        except Exception as exc:
            # What the Invoke API reports as a function error.
            traceback.print_exc()
            status, headers = 500, {"content-type": "application/json"}
            payload = json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode()
        self.close_connection = True
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(payload)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            caller_waited = True
        except (BrokenPipeError, ConnectionResetError):
            # The caller gave up (a readiness probe during a cold start); the invocation still ran.
            caller_waited = False
        self.server.record(event["path"], status, started, caller_waited)

    do_GET = do_POST = do_PUT = do_DELETE = _invoke

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one JSON line per invocation instead


class Environment(socketserver.TCPServer):
    """One Lambda execution environment: one process, one invocation at a time."""

    def __init__(self, sock: socket.socket, handler: Any, function_name: str, timeout_s: float, log: Path | None):
        super().__init__(sock.getsockname(), Invoker, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.handler = handler
        self.function_name = function_name
        self.timeout_s = timeout_s
        self.log = log

    def context(self) -> LambdaContext:
        return LambdaContext(self.function_name, self.timeout_s)

    def record(self, path: str, status: int, started: float, caller_waited: bool) -> None:
        if self.log is None:
            return
        ms = round((time.monotonic() - started) * 1000)
        line = json.dumps({"env": os.getpid(), "path": path, "status": status, "ms": ms, "answered": caller_waited})
        with self.log.open("a") as f:
            f.write(line + "\n")


def load_handler(spec: str) -> Any:
    module, _, attr = spec.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def serve_environment(sock: socket.socket, args: argparse.Namespace) -> None:
    handler = load_handler(args.handler)  # the cold start
    Environment(sock, handler, args.function_name, args.timeout, args.invocations).serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, required=True, help="the unpacked deployment zip")
    parser.add_argument("--handler", required=True, help="module.attribute, as in the function's configuration")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--environments", type=int, default=2)
    parser.add_argument("--function-name", default="replenisher")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--invocations", type=Path, help="append one JSON line per invocation here")
    parser.add_argument("--runtime", type=Path, help="the runtime's own packages (Lambda's /var/runtime)")
    args = parser.parse_args()

    code = args.code.resolve()
    sys.path.insert(0, str(code))
    if args.runtime is not None:
        sys.path.append(str(args.runtime.resolve()))
    os.chdir(code)
    os.environ.update(
        {
            "AWS_LAMBDA_FUNCTION_NAME": args.function_name,
            "AWS_LAMBDA_FUNCTION_VERSION": "1",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
            "AWS_REGION": "eu-central-1",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python_local",
            "LAMBDA_TASK_ROOT": str(code),
        }
    )

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(64)

    children = []
    for _ in range(args.environments):
        pid = os.fork()
        if pid == 0:
            try:
                serve_environment(sock, args)
            finally:
                os._exit(1)
        children.append(pid)

    def stop(signum: int, _frame: object) -> None:
        for child in children:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # An environment that dies takes the whole stand-in down: a test must not pass on fewer.
    pid, status = os.wait()
    print(f"execution environment {pid} exited ({status}); stopping", file=sys.stderr, flush=True)
    stop(signal.SIGTERM, None)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
