"""Jobs against the running service: add, batch, get, delete, pop and the verbs, dead letter."""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, cast

import pytest

import delayq

from fault_proxy import FaultProxy


def test_add_creates_a_ready_job_and_a_second_add_of_the_id_returns_it(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    first = dq.add(topic, {"order": "1042", "tags": ["a", "ü"]}, id=jid("order-1042"), ttr=45)
    assert first["created"] is True
    job = first["job"]
    assert job["id"] == jid("order-1042")
    assert job["topic"] == topic
    assert job["state"] == "ready"
    assert job["body"] == {"order": "1042", "tags": ["a", "ü"]}
    assert job["ttr"] == 45
    assert job["attempts"] == 0
    assert abs(job["createdAt"] - time.time() * 1000) < 60_000

    again = dq.add(topic, {"order": "other"}, id=jid("order-1042"))
    assert again["created"] is False
    assert again["job"]["body"] == {"order": "1042", "tags": ["a", "ü"]}


def test_add_without_an_id_gets_a_uuid_from_the_client(dq: delayq.Client, topic: str) -> None:
    job = dq.add(topic, "plain text")["job"]
    assert str(uuid.UUID(job["id"])) == job["id"]
    assert dq.get(job["id"])["body"] == "plain text"


def test_add_sends_every_option_under_the_api_names(dq: delayq.Client, topic: str) -> None:
    deadline = int(time.time() * 1000) + 3_600_000
    job = dq.add(
        topic,
        None,
        delay=30,
        ttr=20,
        max_attempts=4,
        backoff=[5, 30],
        deadline=deadline,
    )["job"]
    assert job["state"] == "delayed"
    assert abs(job["dueAt"] - job["createdAt"] - 30_000) <= 50
    assert job["maxAttempts"] == 4
    assert job["backoff"] == [5, 30]
    assert job["deadline"] == deadline
    assert job["body"] is None

    run_at = datetime.now(timezone.utc) + timedelta(hours=2)
    later = dq.add(topic, 1, run_at=run_at.isoformat(), backoff="wechatpay")["job"]
    assert abs(later["dueAt"] - run_at.timestamp() * 1000) <= 2
    assert later["backoff"] == "wechatpay"


def test_add_replace_overwrites_a_job_that_is_not_reserved(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, "old", id=jid("r1"), delay=60)
    replaced = dq.add(topic, "new", id=jid("r1"), replace=True)
    assert replaced["job"]["body"] == "new"
    assert replaced["job"]["state"] == "ready"


def test_add_batch_answers_one_result_per_item_in_order(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    results = dq.add_batch(
        [
            {"topic": topic, "id": jid("b1"), "body": 1},
            {"topic": topic, "body": 2, "delay": 60},
            {"topic": topic, "body": 3, "ttr": 0},
            {"topic": topic, "id": jid("b1"), "body": "again"},
        ]
    )
    assert len(results) == 4
    first, second, bad, dup = results
    assert "job" in first and first["created"] is True and first["job"]["id"] == jid("b1")
    assert "job" in second and second["job"]["state"] == "delayed"
    assert str(uuid.UUID(second["job"]["id"])) == second["job"]["id"]
    assert "error" in bad and bad["error"]["code"] == "invalid_request"
    assert "ttr" in bad["error"]["message"]
    assert "job" in dup and dup["created"] is False and dup["job"]["body"] == 1
    assert dq.topic(topic)["counts"] == {"delayed": 1, "ready": 1, "reserved": 0, "dead": 0}


def test_get_and_delete(dq: delayq.Client, topic: str) -> None:
    job_id = dq.add(topic, {"x": 1})["job"]["id"]
    assert dq.get(job_id)["state"] == "ready"
    dq.delete(job_id)
    assert dq.get(job_id)["state"] == "deleted"
    dq.delete(job_id)  # again: succeeds
    assert dq.pop(topic) == []


def test_unknown_job_is_job_not_found(dq: delayq.Client) -> None:
    missing = f"missing-{uuid.uuid4().hex}"
    for call in (lambda: dq.get(missing), lambda: dq.delete(missing)):
        with pytest.raises(delayq.DelayqError) as caught:
            call()
        assert caught.value.code == "job_not_found"
        assert caught.value.status == 404
        assert missing in caught.value.message
        # the answer's x-request-id, to quote to the operator
        assert re.fullmatch(r"[0-9a-f-]{36}", caught.value.request_id or "")


def test_pop_then_finish_with_the_receipt(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, "a", id=jid("p1"))
    dq.add(topic, "b", id=jid("p2"))
    dq.add(topic, "c", id=jid("p3"), delay=60)
    jobs = dq.pop(topic, count=10)
    assert sorted(j["id"] for j in jobs) == [jid("p1"), jid("p2")]
    for job in jobs:
        assert job["state"] == "reserved"
        assert job["attempts"] == 1
        assert job["receipt"]
        assert job["reservedUntil"] > time.time() * 1000
        dq.finish(job["id"], receipt=job["receipt"])
        assert dq.get(job["id"])["state"] == "finished"
    dq.finish(jobs[0]["id"], receipt=jobs[0]["receipt"])  # again: succeeds
    assert dq.pop(topic) == []


def test_finish_and_pop_finishes_the_last_pop_and_takes_the_next_in_one_request(
    dq: delayq.Client, proxy: FaultProxy, token: str, topic: str, jid: Callable[[str], str]
) -> None:
    for n in range(2):
        dq.add(topic, {"n": n}, id=jid(f"n{n}"))
    held = dq.pop(topic)
    with delayq.Client(proxy.url, token) as via:
        nxt = via.finish_and_pop(topic, [*held, {"id": jid("missing")}], wait=1)
    assert nxt["finished"][0] == {"finished": True}
    missing = nxt["finished"][1]
    assert "error" in missing and missing["error"]["code"] == "job_not_found"
    assert [(j["id"], j["body"]) for j in nxt["jobs"]] == [(jid("n1"), {"n": 1})]
    assert dq.get(jid("n0"))["state"] == "finished"
    # One request: the pop, carrying the jobs to finish as ids and receipts.
    assert len(proxy.seen) == 1
    seen = proxy.seen[0]
    assert (seen.method, seen.path) == ("POST", f"/v1/topics/{topic}/pop")
    assert seen.json() == {
        "wait": 1,
        "finish": [{"id": held[0]["id"], "receipt": held[0]["receipt"]}, {"id": jid("missing")}],
    }
    assert dq.finish_and_pop(topic, nxt["jobs"]) == {"jobs": [], "finished": [{"finished": True}]}
    assert dq.get(jid("n1"))["state"] == "finished"


def test_finish_many_finishes_what_a_pop_gave_in_one_request(
    dq: delayq.Client, proxy: FaultProxy, token: str, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add_batch([{"topic": topic, "id": jid(f"m{n}"), "body": {"n": n}} for n in range(3)])
    jobs = dq.pop(topic, count=3)
    assert len(jobs) == 3
    dq.add(topic, None, id=jid("ready"))  # not reserved: refused, the others finish regardless
    missing = jid("missing")
    with delayq.Client(proxy.url, token) as via:
        results = via.finish_many([*jobs, {"id": jid("ready")}, {"id": missing}])
    assert results[:3] == [{"finished": True}] * 3
    not_reserved, not_found = results[3:]
    assert "error" in not_reserved and not_reserved["error"]["code"] == "not_reserved"
    assert "error" in not_found and not_found["error"]["code"] == "job_not_found"
    assert missing in not_found["error"]["message"]

    # One request, with only each job's id and receipt (no receipt when it has none).
    assert len(proxy.seen) == 1
    seen = proxy.seen[0]
    assert (seen.method, seen.path) == ("POST", "/v1/jobs/finish")
    assert seen.json() == {
        "jobs": [{"id": j["id"], "receipt": j["receipt"]} for j in jobs]
        + [{"id": jid("ready")}, {"id": missing}]
    }

    for job in jobs:
        assert dq.get(job["id"])["state"] == "finished"
    assert dq.get(jid("ready"))["state"] == "ready"
    assert dq.topic(topic)["counts"] == {"delayed": 0, "ready": 1, "reserved": 0, "dead": 0}
    # Again with the same receipts: finishing a finished job succeeds.
    assert dq.finish_many(jobs) == [{"finished": True}] * 3

    # An item made by hand goes as it is: a misspelt receipt is refused, not dropped.
    misspelt: delayq.FinishJob = {"id": jid("ready")}
    misspelt["reciept"] = "p1.x"  # type: ignore[typeddict-unknown-key]
    [refused] = dq.finish_many([misspelt])
    assert "error" in refused and refused["error"]["code"] == "invalid_request"
    assert "reciept" in refused["error"]["message"]
    assert dq.get(jid("ready"))["state"] == "ready"

    # A job read with get while ready (no receipt) goes as it is too, not cut down to its id
    # (which would finish it for whoever holds it): a misspelt receipt on it is refused.
    got = dq.get(jid("ready"))
    assert got["state"] == "ready" and "receipt" not in got
    [popped] = dq.pop(topic, count=1)
    assert popped["id"] == jid("ready")
    misread: Dict[str, Any] = {**got, "reciept": popped["receipt"]}
    [refused] = dq.finish_many([cast(delayq.FinishJob, misread)])
    assert "error" in refused and refused["error"]["code"] == "invalid_request"
    assert "reciept" in refused["error"]["message"]
    assert dq.get(popped["id"])["state"] == "reserved"
    spelt: Dict[str, Any] = {**got, "receipt": popped["receipt"]}
    assert dq.finish_many([cast(delayq.FinishJob, spelt)]) == [{"finished": True}]

    # What an empty pop gave: nothing to send.
    before = len(proxy.seen)
    with delayq.Client(proxy.url, token) as via:
        assert via.finish_many(via.pop(f"{topic}-none")) == []
    assert len(proxy.seen) == before + 1  # the pop alone


def test_touch_extends_the_lease(dq: delayq.Client, topic: str, jid: Callable[[str], str]) -> None:
    dq.add(topic, None, id=jid("t1"), ttr=30)
    (job,) = dq.pop(topic)
    time.sleep(0.05)
    touched = dq.touch(jid("t1"), receipt=job["receipt"])
    assert touched["state"] == "reserved"
    assert touched["reservedUntil"] > job["reservedUntil"]
    dq.touch(jid("t1"))  # without a receipt: for whoever holds it


def test_release_gives_the_job_back_and_counts_the_attempt(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, None, id=jid("rel"))
    (job,) = dq.pop(topic)
    released = dq.release(jid("rel"), receipt=job["receipt"], delay=60)
    assert released["state"] == "delayed"
    assert released["attempts"] == 1
    assert released["dueAt"] >= job["reservedUntil"] - job["ttr"] * 1000 + 59_000

    dq.add(topic, None, id=jid("rel2"))
    (job2,) = dq.pop(topic)
    assert dq.release(jid("rel2"), receipt=job2["receipt"], delay=0)["state"] == "ready"


def test_bury_kick_and_delete_dead(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    for n in range(3):
        dq.add(topic, n, id=jid(f"d{n}"))
    for job in dq.pop(topic, count=3):
        buried = dq.bury(job["id"], receipt=job["receipt"])
        assert buried["state"] == "dead"
        assert buried["deadReason"] == "buried"
    page = dq.list_jobs(topic, "dead")
    assert sorted(j["id"] for j in page["jobs"]) == [jid("d0"), jid("d1"), jid("d2")]

    assert dq.kick(topic, ids=[jid("d1")]) == 1
    kicked = dq.get(jid("d1"))
    assert kicked["state"] == "ready" and kicked["attempts"] == 0
    assert dq.kick(topic, count=1) == 1
    assert dq.topic(topic)["counts"]["dead"] == 1
    assert dq.delete_dead(topic, count=10) == 1
    assert dq.topic(topic)["counts"]["dead"] == 0
    assert dq.kick(topic) == 0


def test_verbs_on_a_job_that_is_not_reserved_are_not_reserved(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, None, id=jid("nr"))
    for call in (
        lambda: dq.finish(jid("nr")),
        lambda: dq.touch(jid("nr")),
        lambda: dq.release(jid("nr")),
        lambda: dq.bury(jid("nr")),
    ):
        with pytest.raises(delayq.DelayqError) as caught:
            call()
        assert (caught.value.code, caught.value.status) == ("not_reserved", 409)


def test_a_receipt_from_another_reservation_is_stale(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, None, id=jid("st"))
    (job,) = dq.pop(topic)
    dq.release(jid("st"), receipt=job["receipt"])
    (again,) = dq.pop(topic)
    assert again["receipt"] != job["receipt"]
    with pytest.raises(delayq.DelayqError) as caught:
        dq.finish(jid("st"), receipt=job["receipt"])
    assert (caught.value.code, caught.value.status) == ("stale_receipt", 409)
    dq.finish(jid("st"), receipt=again["receipt"])


def test_an_id_used_by_another_topic_is_job_exists(
    dq: delayq.Client, topic: str, new_topic: Callable[[str], str]
) -> None:
    dq.add(topic, None, id=f"ex-{topic}")
    with pytest.raises(delayq.DelayqError) as caught:
        dq.add(new_topic("py"), None, id=f"ex-{topic}")
    assert (caught.value.code, caught.value.status) == ("job_exists", 409)


def test_replacing_a_reserved_job_is_job_reserved(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    dq.add(topic, None, id=jid("held"))
    dq.pop(topic)
    with pytest.raises(delayq.DelayqError) as caught:
        dq.add(topic, "new", id=jid("held"), replace=True)
    assert (caught.value.code, caught.value.status) == ("job_reserved", 409)


def test_bad_input_is_invalid_request_naming_the_field(dq: delayq.Client, topic: str) -> None:
    with pytest.raises(delayq.DelayqError) as caught:
        dq.add(topic, None, ttr=0)
    assert (caught.value.code, caught.value.status) == ("invalid_request", 400)
    assert "ttr" in caught.value.message

    with pytest.raises(delayq.DelayqError) as caught:
        dq.pop(topic, count=500)
    assert (caught.value.code, caught.value.status) == ("invalid_request", 400)
    assert "count" in caught.value.message

    with pytest.raises(delayq.DelayqError) as caught:
        dq.add("bad topic!", None)
    assert caught.value.code == "invalid_request" and "topic" in caught.value.message


def test_dot_segments_are_refused_before_sending(dq: delayq.Client) -> None:
    for bad in (".", "..", ""):
        with pytest.raises(delayq.DelayqError) as caught:
            dq.get(bad)
        assert (caught.value.code, caught.value.status) == ("invalid_request", 0)


def test_ids_with_url_characters_reach_their_job(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    job_id = jid("a:b@c~d+e=f.g")
    dq.add(topic, "odd", id=job_id)
    assert dq.get(job_id)["body"] == "odd"
    (job,) = dq.pop(topic)
    dq.finish(job_id, receipt=job["receipt"])
    assert dq.get(job_id)["state"] == "finished"


def test_a_body_over_the_limit_is_payload_too_large(dq: delayq.Client, topic: str) -> None:
    with pytest.raises(delayq.DelayqError) as caught:
        dq.add(topic, "x" * 300_000)
    assert (caught.value.code, caught.value.status) == ("payload_too_large", 413)
    assert dq.topic(topic)["counts"]["ready"] == 0


def test_a_wrong_token_is_unauthorized(url: str, topic: str) -> None:
    with delayq.Client(url, "not-a-token") as bad:
        with pytest.raises(delayq.DelayqError) as caught:
            bad.add(topic, None)
        assert (caught.value.code, caught.value.status) == ("unauthorized", 401)
        assert bad.health()["status"] == "ok"  # /health needs no token


def test_a_scoped_token_is_forbidden_outside_its_topics(
    url: str,
    scoped_token: str,
    dq: delayq.Client,
    topic: str,
    new_topic: Callable[[str], str],
) -> None:
    shop = new_topic("shop")
    with delayq.Client(url, scoped_token) as scoped:
        added = scoped.add(shop, {"sku": 1})
        assert added["created"] is True
        assert scoped.pop(shop)[0]["body"] == {"sku": 1}

        other = dq.add(topic, "secret")["job"]["id"]
        for call in (
            lambda: scoped.add(topic, None),
            lambda: scoped.pop(topic),
            lambda: scoped.topic(topic),
            lambda: scoped.get(other),
        ):
            with pytest.raises(delayq.DelayqError) as caught:
                call()
            assert caught.value.status in (403, 404)
            assert caught.value.code in ("forbidden", "job_not_found")
            assert "secret" not in caught.value.message
        with pytest.raises(delayq.DelayqError) as caught:
            scoped.pop(topic)
        assert (caught.value.code, caught.value.status) == ("forbidden", 403)
        listed: List[str] = []
        page = scoped.topics()
        for _ in range(100):
            listed += [t["topic"] for t in page["topics"]]
            if "cursor" not in page:
                break
            page = scoped.topics(after=page["cursor"])
        assert all(name.startswith("shop.") for name in listed)
        assert shop in listed
