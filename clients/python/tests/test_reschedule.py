"""Changing a waiting job (reschedule, promote) and failure reasons (release's and bury's error),
against the running service."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

import delayq


def test_reschedule_moves_a_delayed_job_and_promote_makes_it_ready(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    id = jid("moved")
    dq.add(topic, {"n": 1}, id=id, delay=60)
    later = dq.reschedule(id, delay=3600)
    assert later["state"] == "delayed"
    assert abs(later["dueAt"] - (time.time() * 1000 + 3_600_000)) < 60_000
    run_at = int(time.time() * 1000) + 7_200_000
    assert dq.reschedule(id, run_at=run_at)["dueAt"] == run_at
    assert dq.pop(topic) == []
    promoted = dq.promote(id)
    assert promoted["state"] == "ready"
    assert promoted["body"] == {"n": 1}
    with pytest.raises(delayq.DelayqError) as caught:
        dq.promote(id)
    assert (caught.value.code, caught.value.status) == ("invalid_state", 409)
    [job] = dq.pop(topic)
    assert job["id"] == id
    with pytest.raises(delayq.DelayqError) as refused:
        dq.reschedule(id, delay=5)
    assert (refused.value.code, refused.value.status) == ("invalid_state", 409)


def test_reschedule_refuses_a_run_at_in_seconds_naming_the_field(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    id = jid("bad-time")
    dq.add(topic, None, id=id, delay=60)
    with pytest.raises(delayq.DelayqError) as caught:
        dq.reschedule(id, run_at=int(time.time()) + 60)
    assert (caught.value.code, caught.value.status) == ("invalid_request", 400)
    assert "runAt" in str(caught.value)


def test_release_and_bury_keep_their_error_as_last_error(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    id = jid("failing")
    dq.add(topic, None, id=id, max_attempts=3)
    dq.pop(topic)
    released = dq.release(id, error="bank timed out | retrying")
    last = released.get("lastError")
    assert last is not None
    assert (last["message"], last["attempt"]) == ("bank timed out | retrying", 1)
    [job] = dq.pop(topic)
    buried = dq.bury(id, receipt=job.get("receipt"), error="card stolen")
    assert buried["state"] == "dead"
    last = buried.get("lastError")
    assert last is not None and last["message"] == "card stolen"
    with pytest.raises(delayq.DelayqError) as caught:
        dq.release(id, error="x" * 1025)
    assert caught.value.code == "invalid_request"


def test_the_worker_releases_with_the_handlers_message(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    id = jid("worker")
    dq.add(topic, None, id=id, max_attempts=1)
    stop = threading.Event()

    def handler(job: delayq.Job) -> None:
        stop.set()
        raise ValueError("no card on file")

    dq.work(topic, handler, wait=1, stop=stop)
    job = dq.get(id)
    assert job["state"] == "dead"
    last = job.get("lastError")
    assert last is not None and last["message"] == "no card on file"
