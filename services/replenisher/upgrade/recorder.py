"""The outside party of an upgrade check: refuses every call and counts it.

The candidate's ERP, suppliers, manager's inbox and model all point here, so a run that goes past
the end of its journal meets a refusal (HTTP 503), never a real party: no order, no email, no bill.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from replenisher.stack.ports import LOOPBACK

REFUSAL = b'{"error": "refused: the upgrade check lets no call reach an outside party"}'


class _Refuse(BaseHTTPRequestHandler):
    server: _RecordingServer

    def _refuse(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.server.record(f"{self.command} {self.path}")
        self.send_response(503)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(REFUSAL)))
        self.end_headers()
        self.wfile.write(REFUSAL)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _refuse

    def log_message(self, format: str, *args: object) -> None:
        return


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__((LOOPBACK, 0), _Refuse)
        self._lock = threading.Lock()
        self.calls: list[str] = []

    def record(self, call: str) -> None:
        with self._lock:
            self.calls.append(call)


class Recorder:
    """A refusing HTTP server on a free loopback port, in a thread of this process."""

    def __init__(self) -> None:
        self._server = _RecordingServer()
        self._thread = threading.Thread(target=self._server.serve_forever, name="upgrade-recorder", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    @property
    def calls(self) -> list[str]:
        with self._server._lock:
            return list(self._server.calls)

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)
