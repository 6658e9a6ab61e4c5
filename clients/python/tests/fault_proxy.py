"""A tiny HTTP proxy for the tests: forwards to delayq, or answers 503, drops, delays, on cue."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple, Union
from urllib.parse import urlsplit

# What the proxy does with a request, one per request in order; "forward" once the plan runs out.
#   "forward"             pass it to delayq and relay the answer
#   ("answer", status, headers, body)   answer this without asking delayq
#   "forward_then_503"    pass it to delayq, throw the answer away, answer 503 (the add landed,
#                         the caller never heard)
#   "drop"                close the connection without answering (and without forwarding)
#   ("delay", seconds)    wait, then forward
#   "forward_then_hangup" relay the answer as a kept-alive one, then close the connection (a
#                         keep-alive connection the server closed while the client kept it idle)
Action = Union[str, Tuple[Any, ...]]

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


def unavailable(retry_after: Optional[str] = "0") -> Tuple[str, int, Dict[str, str], bytes]:
    """delayq's answer when Redis does not answer."""
    headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    body = {"error": {"code": "redis_unavailable", "message": "Redis did not answer (proxy)"}}
    return ("answer", 503, headers, json.dumps(body).encode())


class Seen:
    """One request the proxy received."""

    def __init__(self, method: str, path: str, headers: Dict[str, str], body: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class FaultProxy:
    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.plan: List[Action] = []
        self.seen: List[Seen] = []
        self.opened = 0
        self.closed = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy.opened += 1

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with proxy._lock:
                        proxy.closed += 1

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    proxy.seen.append(
                        Seen(self.command, self.path, dict(self.headers.items()), body)
                    )
                    action = proxy.plan.pop(0) if proxy.plan else "forward"
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(action, tuple) and action[0] == "answer":
                    _, status, headers, payload = action
                    self._reply(status, headers, payload)
                    return
                if (
                    isinstance(action, tuple)
                    and action[0] == "delay"
                    and proxy._stopping.wait(action[1])
                ):
                    return
                status, headers, payload = proxy._forward(
                    self.command, self.path, self.headers, body
                )
                if action == "forward_then_503":
                    status, headers, payload = unavailable("0")[1:]
                self._reply(status, headers, payload)
                if action == "forward_then_hangup":
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)

            def _reply(self, status: int, headers: Dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a dropped connection's handler fails to flush: that is the point

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def _forward(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> Tuple[int, Dict[str, str], bytes]:
        conn = http.client.HTTPConnection(*self._target, timeout=60)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
            conn.request(method, path, body=body if body else None, headers=sent)
            answer = conn.getresponse()
            return answer.status, dict(answer.getheaders()), answer.read()
        finally:
            conn.close()

    def bodies(self) -> List[Any]:
        return [seen.json() for seen in self.seen]

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
