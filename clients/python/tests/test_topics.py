"""Topics against the running service: config, stats, paging through topics and jobs, pause."""

from __future__ import annotations

from typing import Callable, List

import delayq


def test_configure_topic_sets_the_defaults_of_jobs_added_afterwards(
    dq: delayq.Client, topic: str
) -> None:
    config = dq.configure_topic(
        topic, {"ttr": 30, "maxAttempts": 3, "backoff": {"type": "exponential", "delay": 1}}
    )
    assert config == {
        "ttr": 30,
        "maxAttempts": 3,
        "backoff": {"type": "exponential", "delay": 1, "factor": 2},
    }
    job = dq.add(topic, None)["job"]
    assert (job["ttr"], job["maxAttempts"]) == (30, 3)
    stats = dq.topic(topic)
    assert stats["topic"] == topic
    assert stats["config"] == config
    assert stats["counts"] == {"delayed": 0, "ready": 1, "reserved": 0, "dead": 0}
    assert stats["oldestDueAt"] == job["dueAt"]

    # A PUT replaces the whole config: what is left out goes.
    assert dq.configure_topic(topic, {"backoff": "alipay"}) == {"backoff": "alipay"}


def test_a_topic_nobody_used_reads_as_empty(dq: delayq.Client, topic: str) -> None:
    stats = dq.topic(topic)
    assert stats["counts"] == {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0}
    assert "oldestDueAt" not in stats
    assert stats["config"] == {}


def test_a_paused_topic_hands_out_nothing(dq: delayq.Client, topic: str) -> None:
    dq.configure_topic(topic, {"paused": True})
    dq.add(topic, "waits")
    assert dq.pop(topic) == []
    dq.configure_topic(topic, {"paused": False})
    assert [j["body"] for j in dq.pop(topic)] == ["waits"]


def test_topics_pages_by_name(dq: delayq.Client, new_topic: Callable[[str], str]) -> None:
    base = new_topic("py")
    names = [f"{base}.{n}" for n in range(3)]
    for name in names:
        dq.add(name, None)
    seen: List[str] = []
    page = dq.topics(cursor=f"{base}.", limit=2)
    assert len(page["topics"]) == 2
    while True:
        seen += [t["topic"] for t in page["topics"] if t["topic"].startswith(base)]
        assert page["hasMore"] == ("cursor" in page)
        cursor = page.get("cursor")
        if cursor is None or not page["topics"][-1]["topic"].startswith(base):
            break
        page = dq.topics(cursor=cursor, limit=2)
    assert seen == names
    first = dq.topics(cursor=f"{base}.", limit=1)["topics"][0]
    assert first["counts"]["ready"] == 1
    # `after`, the parameter's former name, still pages.
    assert dq.topics(after=f"{base}.", limit=1)["topics"][0]["topic"] == names[0]


def test_list_jobs_pages_through_a_state(dq: delayq.Client, topic: str) -> None:
    ids = [dq.add(topic, n, delay=60 + n)["job"]["id"] for n in range(5)]
    dq.add(topic, "ready one")
    seen: List[str] = []
    page = dq.list_jobs(topic, "delayed", limit=2)
    pages = 1
    while page["hasMore"]:
        seen += [j["id"] for j in page["jobs"]]
        page = dq.list_jobs(topic, "delayed", cursor=page["cursor"], limit=2)
        pages += 1
    seen += [j["id"] for j in page["jobs"]]
    assert seen == ids  # by due time
    assert pages >= 3
    ready = dq.list_jobs(topic, "ready")
    assert [j["body"] for j in ready["jobs"]] == ["ready one"]
    assert "cursor" not in ready
    assert ready["hasMore"] is False
