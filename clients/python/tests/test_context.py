"""The client as a context manager: connections are kept alive while open, closed on exit."""

from __future__ import annotations

import time

import pytest

import delayq

from fault_proxy import FaultProxy


def _settle(proxy: FaultProxy, closed: int) -> None:
    deadline = time.monotonic() + 3
    while proxy.closed < closed and time.monotonic() < deadline:
        time.sleep(0.02)


def test_requests_share_a_connection_which_closes_on_exit(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    with delayq.Client(proxy.url, token) as dq:
        dq.add(topic, 1)
        dq.topic(topic)
        dq.pop(topic)
        assert len(proxy.seen) == 3
        assert (proxy.opened, proxy.closed) == (1, 0)
        assert not dq.closed
    assert dq.closed
    _settle(proxy, 1)
    assert (proxy.opened, proxy.closed) == (1, 1)
    with pytest.raises(RuntimeError, match="closed"):
        dq.topic(topic)
    assert len(proxy.seen) == 3


def test_an_exception_inside_the_block_still_closes(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    with pytest.raises(delayq.DelayqError), delayq.Client(proxy.url, token) as dq:
        dq.topic(topic)
        dq.get("nope-" + topic)
    assert dq.closed
    _settle(proxy, 1)
    assert (proxy.opened, proxy.closed) == (1, 1)


def test_a_connection_the_server_closed_while_idle_is_replaced_without_a_retry(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    proxy.plan = ["forward_then_hangup"]
    with delayq.Client(proxy.url, token, retries=0) as dq:
        dq.add(topic, 1)
        _settle(proxy, 1)
        # The pooled connection is dead; retries=0, yet the call goes through on a new one.
        assert dq.topic(topic)["counts"]["ready"] == 1
    assert proxy.opened == 2
    assert [s.method for s in proxy.seen] == ["POST", "GET"]


def test_a_bad_base_url_or_token_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="base_url"):
        delayq.Client("127.0.0.1:8787", "t")
    with pytest.raises(ValueError, match="token"):
        delayq.Client("http://127.0.0.1:8787", "")
    with pytest.raises(ValueError, match="retries"):
        delayq.Client("http://127.0.0.1:8787", "t", retries=-1)
    assert "secret-token" not in repr(delayq.Client("http://127.0.0.1:1", "secret-token"))
