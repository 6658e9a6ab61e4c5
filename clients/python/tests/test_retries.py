"""Retries through a proxy that answers 503, drops, stalls or lies before passing requests on."""

from __future__ import annotations

import json
import time

import pytest

import delayq

from fault_proxy import FaultProxy, unavailable


def client(proxy: FaultProxy, token: str, **options: float) -> delayq.Client:
    settings = {"retries": 3, "retry_delay": 0.01, "max_retry_delay": 5.0, **options}
    return delayq.Client(
        proxy.url,
        token,
        retries=int(settings["retries"]),
        retry_delay=settings["retry_delay"],
        max_retry_delay=settings["max_retry_delay"],
        timeout=settings.get("timeout", 30.0),
    )


def test_503s_are_retried_until_the_answer_comes(proxy: FaultProxy, token: str, topic: str) -> None:
    proxy.plan = [unavailable("0"), unavailable("0")]
    with client(proxy, token) as dq:
        stats = dq.topic(topic)
    assert stats["topic"] == topic
    assert [s.method for s in proxy.seen] == ["GET", "GET", "GET"]


def test_retry_after_is_waited_for_but_capped_by_max_retry_delay(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    proxy.plan = [unavailable("1")]
    with client(proxy, token) as dq:
        started = time.monotonic()
        dq.topic(topic)
        assert time.monotonic() - started >= 1.0

    proxy.plan = [unavailable("30")]
    with client(proxy, token, max_retry_delay=0.2) as dq:
        started = time.monotonic()
        dq.topic(topic)
        assert time.monotonic() - started < 2.0


def test_when_retries_run_out_the_last_error_is_raised(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    proxy.plan = [unavailable("0")] * 10
    with client(proxy, token, retries=2) as dq, pytest.raises(delayq.DelayqError) as caught:
        dq.topic(topic)
    assert (caught.value.code, caught.value.status) == ("redis_unavailable", 503)
    assert caught.value.retry_after == 0
    assert len(proxy.seen) == 3


def test_an_add_without_an_id_that_landed_is_not_added_twice_by_its_retry(
    proxy: FaultProxy, token: str, dq: delayq.Client, topic: str
) -> None:
    # The first attempt reaches delayq and adds the job; the caller hears 503 and retries.
    proxy.plan = ["forward_then_503"]
    with client(proxy, token) as retrying:
        result = retrying.add(topic, {"n": 1})
    first, second = proxy.bodies()
    assert first["id"] == second["id"] == result["job"]["id"]
    assert result["created"] is False
    assert dq.topic(topic)["counts"]["ready"] == 1


def test_a_batch_and_an_add_command_keep_their_ids_across_retries(
    proxy: FaultProxy, token: str, dq: delayq.Client, topic: str
) -> None:
    proxy.plan = ["forward_then_503", "forward", "forward_then_503"]
    with client(proxy, token) as retrying:
        results = retrying.add_batch([{"topic": topic, "body": n} for n in range(3)])
        assert all("job" in r and r["created"] is False for r in results)
        command = retrying.command({"command": "add", "topic": topic, "body": "c"})
        assert command["success"] is True
    batch1, batch2, command1, command2 = proxy.bodies()
    assert [j["id"] for j in batch1["jobs"]] == [j["id"] for j in batch2["jobs"]]
    assert command1["id"] == command2["id"] == command["id"]
    assert dq.topic(topic)["counts"]["ready"] == 4


def test_network_errors_are_retried_and_reported_as_network_error(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    proxy.plan = ["drop", "drop"]
    with client(proxy, token) as dq:
        assert dq.topic(topic)["topic"] == topic
    assert len(proxy.seen) == 3

    proxy.plan = ["drop"] * 10
    with client(proxy, token, retries=1) as dq, pytest.raises(delayq.DelayqError) as caught:
        dq.topic(topic)
    assert (caught.value.code, caught.value.status) == ("network_error", 0)
    assert len(proxy.seen) == 5


def test_nothing_listening_is_a_network_error(token: str) -> None:
    with (
        delayq.Client("http://127.0.0.1:9", token, retries=1, retry_delay=0.01) as dq,
        pytest.raises(delayq.DelayqError) as caught,
    ):
        dq.health()
    assert (caught.value.code, caught.value.status) == ("network_error", 0)


def test_an_answer_that_takes_too_long_is_a_timeout(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    proxy.plan = [("delay", 3.0)]
    with client(proxy, token, retries=0, timeout=0.5) as dq:
        started = time.monotonic()
        with pytest.raises(delayq.DelayqError) as caught:
            dq.topic(topic)
        assert time.monotonic() - started < 2.0
    assert (caught.value.code, caught.value.status) == ("timeout", 0)

    proxy.plan = [("delay", 3.0)]
    with client(proxy, token, retries=1, timeout=0.5) as dq:
        assert dq.topic(topic)["topic"] == topic  # the retry went through
    assert len(proxy.seen) == 3


def test_4xx_and_500_are_not_retried(proxy: FaultProxy, token: str, topic: str) -> None:
    with client(proxy, token) as dq:
        with pytest.raises(delayq.DelayqError) as caught:
            dq.get(f"{topic}.missing")
        assert caught.value.code == "job_not_found"
        assert len(proxy.seen) == 1

        with pytest.raises(delayq.DelayqError) as caught:
            dq.add(topic, None, ttr=0)
        assert caught.value.code == "invalid_request"
        assert len(proxy.seen) == 2

        error = {"error": {"code": "internal_error", "message": "a bug"}}
        proxy.plan = [
            ("answer", 500, {"Content-Type": "application/json"}, json.dumps(error).encode())
        ]
        with pytest.raises(delayq.DelayqError) as caught:
            dq.topic(topic)
        assert (caught.value.code, caught.value.status) == ("internal_error", 500)
        assert len(proxy.seen) == 3


def test_an_answer_that_is_not_delayq_json_is_invalid_response(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    html = b"<html><body>Bad gateway</body></html>"
    proxy.plan = [
        ("answer", 502, {"Content-Type": "text/html"}, html),
        ("answer", 200, {"Content-Type": "text/html"}, html),
        ("answer", 200, {"Content-Type": "application/json"}, b'{"unexpected": true}'),
    ]
    with client(proxy, token) as dq:
        for status in (502, 200, 200):
            with pytest.raises(delayq.DelayqError) as caught:
                dq.topic(topic)
            assert (caught.value.code, caught.value.status) == ("invalid_response", status)
    assert len(proxy.seen) == 3


def test_a_lone_command_that_finds_redis_unreachable_raises_after_retries(
    proxy: FaultProxy, token: str, topic: str
) -> None:
    answer = {"success": False, "error": "redis_unavailable: Redis did not answer"}
    reply = ("answer", 503, {"Retry-After": "0"}, json.dumps(answer).encode())
    proxy.plan = [reply, reply]
    with client(proxy, token, retries=1) as dq, pytest.raises(delayq.DelayqError) as caught:
        dq.command({"command": "pop", "topic": topic})
    assert (caught.value.code, caught.value.status) == ("redis_unavailable", 503)
    assert caught.value.message == "Redis did not answer"
    assert len(proxy.seen) == 2


def test_health_answers_a_degraded_503_instead_of_raising(proxy: FaultProxy, token: str) -> None:
    body = {"status": "degraded", "redis": "unreachable", "message": "no answer"}
    proxy.plan = [("answer", 503, {"Content-Type": "application/json"}, json.dumps(body).encode())]
    with client(proxy, token) as dq:
        assert dq.health() == body
        assert dq.health() == {"status": "ok", "redis": "ok"}
    assert len(proxy.seen) == 2
    assert all(s.method == "GET" and s.path == "/health" for s in proxy.seen)
    assert all("Authorization" not in s.headers for s in proxy.seen)


def test_requests_carry_the_token_and_json(proxy: FaultProxy, token: str, topic: str) -> None:
    with client(proxy, token) as dq:
        dq.add(topic, {"é": "ü"}, id=f"{topic}.h")
        dq.delete_dead(topic, count=5)
    add, purge = proxy.seen
    assert add.headers["Authorization"] == f"Bearer {token}"
    assert add.headers["Content-Type"] == "application/json"
    assert json.loads(add.body.decode("utf-8"))["body"] == {"é": "ü"}
    assert (purge.method, purge.path) == ("DELETE", f"/v1/topics/{topic}/dead?count=5")
    assert purge.body == b""
