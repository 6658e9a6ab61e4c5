"""Client.work against the running service: what it runs, finishes, gives back, and keeps."""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional, Tuple

import pytest

import delayq

from fault_proxy import FaultProxy


def _until(check: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not so within {seconds} s"
        time.sleep(0.02)


def _in_thread(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_work_runs_every_job_once_and_finishes_each_in_the_next_pop(
    dq: delayq.Client, proxy: FaultProxy, token: str, topic: str, jid: Callable[[str], str]
) -> None:
    ids = [jid(f"w{n}") for n in range(6)]
    for id in ids:
        dq.add(topic, {"id": id}, id=id)
    ran: List[str] = []
    lock = threading.Lock()

    def handler(job: delayq.Job) -> None:
        with lock:
            ran.append(job["id"])

    stop = threading.Event()
    with delayq.Client(proxy.url, token) as via:
        worker = _in_thread(lambda: via.work(topic, handler, concurrency=2, wait=1, stop=stop))
        _until(lambda: len(ran) == len(ids))
        stop.set()
        worker.join(10)
    assert not worker.is_alive()
    assert sorted(ran) == sorted(ids)
    for id in ids:
        assert dq.get(id)["state"] == "finished"
    # No finish request of its own: the pops carry the finishes (or, when the stop finds a loop
    # still holding its last job, one finish_many: POST /v1/jobs/finish).
    own = [s.path for s in proxy.seen if s.path.startswith("/v1/jobs/") and s.path.endswith("/finish")]
    assert [path for path in own if path != "/v1/jobs/finish"] == []
    assert len(own) <= 2  # at most one finish_many per loop
    pops = [s.json() for s in proxy.seen if s.path == f"/v1/topics/{topic}/pop"]
    assert all(pop["wait"] == (0 if pop["finish"] else 1) for pop in pops)


def test_work_releases_a_job_whose_handler_raises_and_tells_on_error(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, None, id=jid("bad"), max_attempts=2)
    dq.add(topic, None, id=jid("good"))
    errors: List[Tuple[str, Optional[str]]] = []

    def handler(job: delayq.Job) -> None:
        if job["id"] == jid("bad"):
            raise RuntimeError("no card on file")

    def on_error(error: BaseException, job: Optional[delayq.Job]) -> None:
        errors.append((str(error), job["id"] if job else None))

    stop = threading.Event()
    worker = _in_thread(lambda: dq.work(topic, handler, wait=1, stop=stop, on_error=on_error))
    _until(lambda: dq.get(jid("bad"))["state"] == "dead" and dq.get(jid("good"))["state"] == "finished")
    stop.set()
    worker.join(10)
    # Released each time and (the topic has no backoff) run again at once, until out of attempts.
    assert errors == [("no card on file", jid("bad"))] * 2
    assert dq.get(jid("bad"))["attempts"] == 2


def test_work_keeps_the_lease_of_a_job_whose_handler_outlasts_its_ttr(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, None, id=jid("long"), ttr=1)
    started = threading.Event()
    seen_by_others: List[List[delayq.Job]] = []

    def handler(job: delayq.Job) -> None:
        started.set()
        time.sleep(2.5)

    stop = threading.Event()
    worker = _in_thread(lambda: dq.work(topic, handler, wait=1, stop=stop))
    assert started.wait(10)
    time.sleep(1.8)  # past the 1 s TTR: without touches the job would be due again
    seen_by_others.append(dq.pop(topic))
    _until(lambda: dq.get(jid("long"))["state"] == "finished")
    stop.set()
    worker.join(10)
    assert seen_by_others == [[]]
    assert dq.get(jid("long"))["attempts"] == 1


def test_work_raises_when_delayq_refuses_its_pop_and_checks_its_options(
    dq: delayq.Client, topic: str
) -> None:
    dq.configure_topic(topic, {"push": {"url": "https://shop.example/hook"}})
    with pytest.raises(delayq.DelayqError) as refused:
        dq.work(topic, lambda job: None, wait=1)
    assert refused.value.code == "push_topic"
    for bad in ({"concurrency": 0}, {"count": 101}, {"wait": 21}):
        with pytest.raises(ValueError):
            dq.work(topic, lambda job: None, **bad)  # type: ignore[arg-type]
