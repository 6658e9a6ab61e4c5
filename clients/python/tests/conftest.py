"""Fixtures: the running delayq (DELAYQ_URL, DELAYQ_TOKEN, DELAYQ_SCOPED_TOKEN), clients, topics."""

from __future__ import annotations

import json
import os
import re
import urllib.request
import uuid
from typing import Any, Callable, Dict, Iterator, cast

import pytest

import delayq

from fault_proxy import FaultProxy


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        pytest.fail(
            f"{name} is not set. These tests drive a running delayq: run them with "
            "`npx vitest run test/clients/python.test.ts` from the repository root, or set "
            "DELAYQ_URL, DELAYQ_TOKEN, DELAYQ_SCOPED_TOKEN (a token limited to `shop.*`) and "
            "DELAYQ_SIGNATURE_VECTORS yourself.",
            pytrace=False,
        )
    return value


@pytest.fixture(scope="session")
def url() -> str:
    return _env("DELAYQ_URL").rstrip("/")


@pytest.fixture(scope="session")
def token() -> str:
    return _env("DELAYQ_TOKEN")


@pytest.fixture(scope="session")
def scoped_token() -> str:
    return _env("DELAYQ_SCOPED_TOKEN")


@pytest.fixture
def dq(url: str, token: str) -> Iterator[delayq.Client]:
    with delayq.Client(url, token, retry_delay=0.01) as client:
        yield client


@pytest.fixture
def new_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Topic names of this test's own: the test's name and a random suffix."""
    # pytest leaves FixtureRequest.node unannotated; in a test's own fixture it is the test item.
    item = cast(pytest.Item, request.node)  # pyright: ignore[reportUnknownMemberType]
    base = re.sub(r"[^A-Za-z0-9]+", "-", item.name)[:40].strip("-")

    def make(prefix: str = "py") -> str:
        return f"{prefix}.{base}.{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def topic(new_topic: Callable[[str], str]) -> str:
    return new_topic("py")


@pytest.fixture
def proxy(url: str) -> Iterator[FaultProxy]:
    server = FaultProxy(url)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def openapi(url: str) -> Dict[str, Any]:
    with urllib.request.urlopen(f"{url}/openapi.json", timeout=10) as answer:
        document: Dict[str, Any] = json.load(answer)
    return document


@pytest.fixture
def jid(topic: str) -> Callable[[str], str]:
    """Job ids of this test's own (ids are unique across topics, for the whole deployment)."""
    return lambda name: f"{topic}.{name}"
