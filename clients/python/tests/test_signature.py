"""verify_signature against headers made by the service's own signWebhook, tampered with, stale,
or from a rotated secret (the vectors come in DELAYQ_SIGNATURE_VECTORS)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import pytest

import delayq
from delayq import verify_signature


@pytest.fixture(scope="module")
def vectors() -> Dict[str, Any]:
    path = os.environ.get("DELAYQ_SIGNATURE_VECTORS", "")
    if not path:
        pytest.fail(
            "DELAYQ_SIGNATURE_VECTORS is not set: it names a JSON file of headers made by the "
            "service's signWebhook; test/clients/python.test.ts writes it.",
            pytrace=False,
        )
    with open(path, encoding="utf-8") as source:
        loaded: Dict[str, Any] = json.load(source)
    assert len(loaded["signed"]) >= 3
    return loaded


def signed(vectors: Dict[str, Any]) -> List[Dict[str, Any]]:
    return list(vectors["signed"])


def test_every_header_the_service_signed_verifies(vectors: Dict[str, Any]) -> None:
    for v in signed(vectors):
        t = v["at"] // 1000
        assert v["header"].startswith(f"t={t},v1=")
        assert verify_signature(v["secret"], v["header"], v["body"], now=t)
        assert verify_signature(v["secret"], v["header"], v["body"].encode("utf-8"), now=t)
        assert verify_signature(v["secret"].encode("utf-8"), v["header"], v["body"], now=t + 1.5)


def test_a_tampered_body_secret_or_signature_fails(vectors: Dict[str, Any]) -> None:
    for v in signed(vectors):
        t = v["at"] // 1000
        secret, header, body = v["secret"], v["header"], v["body"]
        assert not verify_signature(secret, header, body + " ", now=t)
        assert not verify_signature(secret, header, " " + body, now=t)
        assert not verify_signature(secret + "x", header, body, now=t)
        assert not verify_signature(secret[:-1], header, body, now=t)
        flipped = header[:-1] + ("0" if header[-1] != "0" else "1")
        assert not verify_signature(secret, flipped, body, now=t)
        # The timestamp is signed with the body: moving it breaks the signature.
        moved = header.replace(f"t={t},", f"t={t + 1},")
        assert not verify_signature(secret, moved, body, now=t)


def test_a_body_changed_by_re_encoding_fails(vectors: Dict[str, Any]) -> None:
    delivery = next(v for v in signed(vectors) if v["body"].startswith("{"))
    t = delivery["at"] // 1000
    reencoded = json.dumps(json.loads(delivery["body"]))  # ", " and ": " instead of "," and ":"
    assert reencoded != delivery["body"]
    assert not verify_signature(delivery["secret"], delivery["header"], reencoded, now=t)


def test_the_timestamp_must_be_within_the_tolerance(vectors: Dict[str, Any]) -> None:
    v = signed(vectors)[0]
    t = v["at"] // 1000
    secret, header, body = v["secret"], v["header"], v["body"]
    assert verify_signature(secret, header, body, now=t + 300)
    assert verify_signature(secret, header, body, now=t - 300)
    assert not verify_signature(secret, header, body, now=t + 301)
    assert not verify_signature(secret, header, body, now=t - 301)
    assert verify_signature(secret, header, body, tolerance=10, now=t + 10)
    assert not verify_signature(secret, header, body, tolerance=10, now=t + 11)


def test_now_defaults_to_the_clock(vectors: Dict[str, Any]) -> None:
    fresh, stale = vectors["fresh"], vectors["stale"]
    assert verify_signature(fresh["secret"], fresh["header"], fresh["body"])
    assert not verify_signature(stale["secret"], stale["header"], stale["body"])
    assert verify_signature(stale["secret"], stale["header"], stale["body"], now=stale["at"] / 1000)


def test_any_v1_entry_may_match_while_a_secret_rotates(vectors: Dict[str, Any]) -> None:
    rotated = vectors["rotated"]
    t = rotated["at"] // 1000
    old, new = rotated["secrets"]
    assert rotated["header"].count("v1=") == 2
    assert verify_signature(old, rotated["header"], rotated["body"], now=t)
    assert verify_signature(new, rotated["header"], rotated["body"], now=t)
    assert not verify_signature(old + "-other", rotated["header"], rotated["body"], now=t)


def test_upper_case_hex_and_spaces_are_accepted(vectors: Dict[str, Any]) -> None:
    v = signed(vectors)[0]
    t = v["at"] // 1000
    _, _, mac = v["header"].partition(",v1=")
    assert verify_signature(v["secret"], f"t={t}, v1={mac.upper()}", v["body"], now=t)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        "t=,v1=",
        "t=abc,v1={mac}",
        "v1={mac}",
        "t={t}",
        "t={t},v1=",
        "t={t},v2={mac}",
    ],
)
def test_a_missing_or_malformed_header_fails(vectors: Dict[str, Any], header: Any) -> None:
    v = signed(vectors)[0]
    t = v["at"] // 1000
    _, _, mac = v["header"].partition(",v1=")
    text = header.format(t=t, mac=mac) if isinstance(header, str) else header
    assert not verify_signature(v["secret"], text, v["body"], now=t)


def test_the_header_name_is_exported() -> None:
    assert delayq.SIGNATURE_HEADER == "delayq-signature"
    assert delayq.DEFAULT_TOLERANCE == 300
