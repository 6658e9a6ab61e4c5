"""Long-polling: a waiting pop gets a job added while it waits, and its wait is not a timeout."""

from __future__ import annotations

import threading
import time

import delayq


def test_a_waiting_pop_returns_a_job_added_a_second_later_from_another_thread(
    url: str, token: str, dq: delayq.Client, topic: str
) -> None:
    def add_later() -> None:
        time.sleep(1.0)
        dq.add(topic, {"late": True})

    # One client, two threads: the pop holds one connection while the add takes another.
    adder = threading.Thread(target=add_later)
    started = time.monotonic()
    adder.start()
    try:
        jobs = dq.pop(topic, wait=10)
    finally:
        adder.join()
    took = time.monotonic() - started
    assert [j["body"] for j in jobs] == [{"late": True}]
    assert jobs[0]["receipt"]
    assert 0.9 <= took < 5, took


def test_the_wait_comes_on_top_of_the_timeout(url: str, token: str, topic: str) -> None:
    # A 1 s time limit, a 2 s wait: the pop still answers (empty) instead of timing out.
    with delayq.Client(url, token, timeout=1.0, retries=0) as short:
        started = time.monotonic()
        assert short.pop(topic, wait=2) == []
        took = time.monotonic() - started
        assert 1.8 <= took < 4, took
        started = time.monotonic()
        result = short.command({"command": "pop", "topic": topic, "wait": 2})
        assert result == {"success": True, "error": ""}
        assert time.monotonic() - started >= 1.8
