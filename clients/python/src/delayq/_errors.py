"""The one error the client raises: a delayq answer, or a failure that never got one."""

from __future__ import annotations

from typing import Optional

#: Codes of the client's own, for failures that never got a delayq answer (status 0), or got one
#: that is not delayq's JSON. Every other code is the API's (``invalid_request``, ``forbidden``,
#: ``job_not_found``, ``stale_receipt``, ``redis_unavailable``, ...).
CLIENT_ERROR_CODES = ("network_error", "timeout", "invalid_response")


class DelayqError(Exception):
    """Raised by every client method. Branch on ``code``; ``status`` is the HTTP status.

    ``code`` is the API's error code (``"job_not_found"``, ``"stale_receipt"``, ...) or one of
    the client's own: ``"network_error"`` (no answer: refused, reset, DNS; status 0),
    ``"timeout"`` (no complete answer within the time limit; status 0) and
    ``"invalid_response"`` (an answer that is not delayq's JSON, say a proxy's HTML page).
    ``retry_after`` is the seconds the server's ``Retry-After`` asked for, when it said.
    ``request_id`` is the answer's ``x-request-id``, when delayq answered: quote it to the
    operator, whose log line of that id says what a 5xx's message does not.
    """

    code: str
    status: int
    message: str
    retry_after: Optional[float]
    request_id: Optional[str]

    def __init__(
        self,
        code: str,
        status: int,
        message: str,
        *,
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(code, status, message)
        self.code = code
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.request_id = request_id

    def __str__(self) -> str:
        where = f"HTTP {self.status}" if self.status else "no answer"
        return f"{self.code} ({where}): {self.message}"

    def __repr__(self) -> str:
        return f"DelayqError({self.code!r}, {self.status!r}, {self.message!r})"
