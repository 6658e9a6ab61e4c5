"""One HTTP exchange with delayq over kept-alive connections, and the retry loop around it."""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import ssl
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast
from urllib.parse import urlencode, urlsplit

from ._errors import DelayqError

__version__ = "0.1.0"

QueryValue = Union[str, int, float, None]

# A connection that failed before any answer came may have been closed by the server while it
# sat idle in the pool (Node closes idle keep-alive sockets after 5 s): those are tried once more
# on a new connection, without counting as a retry.
_STALE_CONNECTION_ERRORS = (
    http.client.RemoteDisconnected,
    http.client.BadStatusLine,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
)
_TIMEOUT_ERRORS = (socket.timeout, TimeoutError)
_MAX_IDLE = 8
_CHUNK = 65536


def json_object(value: object) -> Optional[Dict[str, object]]:
    """``value`` (parsed JSON) as an object, or None when it is another JSON value."""
    # JSON object keys are always strings; the values are not known until looked at.
    return cast(Dict[str, object], value) if isinstance(value, dict) else None


class Answer:
    """A delayq answer taken as the call's result: its status and its JSON."""

    __slots__ = ("status", "data")

    def __init__(self, status: int, data: Any) -> None:
        self.status = status
        self.data = data


class _Reply:
    __slots__ = ("status", "headers", "data", "has_json", "text")

    def __init__(
        self, status: int, headers: http.client.HTTPMessage, data: Any, has_json: bool, text: str
    ) -> None:
        self.status = status
        self.headers = headers
        self.data = data
        self.has_json = has_json
        self.text = text


class Transport:
    """Sends requests to one delayq, keeping idle connections for reuse. Safe across threads."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        retries: int,
        retry_delay: float,
        max_retry_delay: float,
        timeout: float,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"delayq.Client: base_url must be an http(s) URL such as "
                f"http://127.0.0.1:8787, not {base_url!r}"
            )
        if parts.query or parts.fragment:
            raise ValueError("delayq.Client: base_url must not have a query or a fragment")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        try:
            self._port = parts.port
        except ValueError:
            raise ValueError(f"delayq.Client: base_url has a bad port: {base_url!r}") from None
        self._prefix = parts.path.rstrip("/")
        self._token = token
        self.retries = retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.timeout = timeout
        self._ssl = ssl.create_default_context() if self._https else None
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Closes the idle connections; connections in use close when their request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, QueryValue]] = None,
        body: Any = None,
        has_body: bool = False,
        timeout: Optional[float] = None,
        auth: bool = True,
        answer_statuses: Sequence[int] = (),
    ) -> Answer:
        """Sends a request, retrying 503s, network errors and timeouts up to ``retries`` times
        with exponential backoff and jitter, waiting at least what ``Retry-After`` asks (up to
        ``max_retry_delay``). Any other status is final: a 4xx would come back the same, and a
        500 is a bug a retry would only repeat."""
        if self._closed:
            raise RuntimeError("delayq.Client is closed; make a new one")
        target = self._target(path, query)
        headers = {
            "Accept": "application/json",
            "User-Agent": f"delayq-python/{__version__}",
        }
        if auth:
            headers["Authorization"] = f"Bearer {self._token}"
        payload: Optional[bytes] = None
        if has_body:
            headers["Content-Type"] = "application/json"
            payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        limit = self.timeout if timeout is None else timeout
        where = f"{method} {path}"
        attempt = 0
        while True:
            try:
                reply = self._exchange(method, target, headers, payload, limit, where)
                if reply.status < 300 or reply.status in answer_statuses:
                    if not reply.has_json:
                        raise DelayqError(
                            "invalid_response",
                            reply.status,
                            f"delayq answered HTTP {reply.status} without a JSON body: "
                            f"{_excerpt(reply.text)}",
                        )
                    return Answer(reply.status, reply.data)
                failure = _error_of(reply)
            except DelayqError as error:
                failure = error
            if not _retryable(failure) or attempt >= self.retries:
                raise failure
            time.sleep(self._backoff(attempt, failure.retry_after))
            attempt += 1

    def _backoff(self, attempt: int, retry_after: Optional[float]) -> float:
        """Exponential with "equal jitter": half the step fixed, half random, so that clients
        that failed together do not come back together."""
        step = self.retry_delay * (2.0**attempt)
        jittered = step / 2 + random.random() * step / 2
        asked = 0.0 if retry_after is None else retry_after
        return min(max(jittered, asked), self.max_retry_delay)

    def _target(self, path: str, query: Optional[Mapping[str, QueryValue]]) -> str:
        pairs = [(k, str(v)) for k, v in (query or {}).items() if v is not None]
        search = urlencode(pairs)
        return f"{self._prefix}{path}{'?' + search if search else ''}"

    def _take(self, limit: float) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=limit, context=self._ssl
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=limit)
        return conn, False

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def _exchange(
        self,
        method: str,
        target: str,
        headers: Dict[str, str],
        payload: Optional[bytes],
        limit: float,
        where: str,
    ) -> _Reply:
        """One attempt. The time limit covers connecting, sending and reading the whole body."""
        deadline = time.monotonic() + limit

        def left() -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DelayqError("timeout", 0, f"{where}: no answer from delayq within {limit} s")
            return remaining

        while True:
            conn, reused = self._take(limit)
            try:
                conn.timeout = left()
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
                conn.request(method, target, body=payload, headers=headers)
                if conn.sock is not None:
                    conn.sock.settimeout(left())
                response = conn.getresponse()
                chunks: List[bytes] = []
                while True:
                    if conn.sock is not None:
                        conn.sock.settimeout(left())
                    chunk = response.read(_CHUNK)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except _STALE_CONNECTION_ERRORS as error:
                conn.close()
                if reused:
                    continue
                raise DelayqError("network_error", 0, f"{where}: {_describe(error)}") from error
            except _TIMEOUT_ERRORS as error:
                conn.close()
                raise DelayqError(
                    "timeout", 0, f"{where}: no answer from delayq within {limit} s"
                ) from error
            except (OSError, http.client.HTTPException) as error:
                conn.close()
                raise DelayqError("network_error", 0, f"{where}: {_describe(error)}") from error
            except BaseException:
                conn.close()
                raise
            if response.will_close:
                conn.close()
            else:
                self._give(conn)
            raw = b"".join(chunks)
            text = raw.decode("utf-8", errors="replace")
            data: Any = None
            has_json = False
            if text.strip() != "":
                try:
                    data = json.loads(text)
                    has_json = True
                except ValueError:
                    pass
            return _Reply(response.status, response.headers, data, has_json, text)


def _retryable(error: DelayqError) -> bool:
    return error.status == 503 or error.code in ("network_error", "timeout")


def _error_of(reply: _Reply) -> DelayqError:
    """The error an answer that is not a success stands for."""
    status = reply.status
    retry_after = _parse_retry_after(reply.headers.get("Retry-After"))
    request_id = reply.headers.get("X-Request-Id")
    body = json_object(reply.data)
    error = body.get("error") if body is not None else None
    details = json_object(error)
    if details is not None:
        code, message = details.get("code"), details.get("message")
        if isinstance(code, str) and isinstance(message, str):
            return DelayqError(
                code, status, message, retry_after=retry_after, request_id=request_id
            )
    # The command protocol answers a lone command's failure as a CommandResult:
    # {"success": false, "error": "<code>: <message>"} (with 503 for redis_unavailable).
    if isinstance(error, str):
        match = re.match(r"^([a-z_]+): (.*)$", error, re.DOTALL)
        if match:
            return DelayqError(
                match.group(1),
                status,
                match.group(2),
                retry_after=retry_after,
                request_id=request_id,
            )
    return DelayqError(
        "invalid_response",
        status,
        f"HTTP {status} without a delayq error body: {_excerpt(reply.text)}",
        retry_after=retry_after,
        request_id=request_id,
    )


def _parse_retry_after(value: Optional[str]) -> Optional[float]:
    """``Retry-After`` in seconds: a number of seconds, or an HTTP date."""
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if re.match(r"^\d+(\.\d+)?$", text):
        return float(text)
    try:
        at = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        return None
    return max(0.0, at.timestamp() - time.time())


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _excerpt(text: str) -> str:
    if text == "":
        return "(empty)"
    return text[:200] + "…" if len(text) > 200 else text
