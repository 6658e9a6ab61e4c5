"""verify_signature: checks the delayq-signature header of a push delivery, for receivers."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import List, Optional, Union

#: The header delayq signs each push delivery and failure notice with.
SIGNATURE_HEADER = "delayq-signature"

#: Seconds a signature's timestamp may be away from now, either side.
DEFAULT_TOLERANCE = 300

_TIMESTAMP = re.compile(r"^\d{1,12}$")
_HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def verify_signature(
    secret: Union[str, bytes],
    header: Optional[str],
    raw_body: Union[str, bytes],
    tolerance: float = DEFAULT_TOLERANCE,
    now: Optional[float] = None,
) -> bool:
    """Whether ``header`` (the ``delayq-signature`` value, ``t=<unix s>,v1=<hex>``) signs
    ``raw_body`` with ``secret``, its timestamp within ``tolerance`` seconds of ``now`` (unix
    seconds, default the current time).

    Pass the body exactly as received, before any JSON parsing: ``bytes`` as read from the
    request, or ``str`` (encoded as UTF-8). Any ``v1`` entry may match: several are sent while
    a secret rotates. Compares in constant time. A missing or malformed header is ``False``.
    """
    if not header or not isinstance(header, str):
        return False
    t: Optional[int] = None
    candidates: List[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and _TIMESTAMP.match(value):
            t = int(value)
        elif name == "v1" and value:
            candidates.append(value.lower())
    if t is None or not candidates:
        return False
    at = time.time() if now is None else now
    if abs(at - t) > tolerance:
        return False
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else raw_body
    expected = hmac.new(key, f"{t}.".encode("ascii") + body, hashlib.sha256).hexdigest()
    ok = False
    for candidate in candidates:
        # The format is public, so refusing a malformed entry early leaks nothing; a well-formed
        # one is compared in constant time, and every entry is looked at.
        if _HEX_SHA256.match(candidate) and hmac.compare_digest(candidate, expected):
            ok = True
    return ok
