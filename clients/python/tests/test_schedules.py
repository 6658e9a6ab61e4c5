"""Recurring schedules against the running service: put, get, list, delete, fires as jobs."""

from __future__ import annotations

import time

import pytest

import delayq


def test_put_schedule_makes_fires_as_jobs_due_at_their_times(
    dq: delayq.Client, topic: str
) -> None:
    name = f"{topic}-s"
    schedule = dq.put_schedule(
        name, "*/2 * * * * *", topic, timezone="Asia/Shanghai", body={"n": 1}, ttr=30
    )
    assert schedule["name"] == name
    assert schedule["timezone"] == "Asia/Shanghai"
    assert schedule["paused"] is False
    assert schedule["ttr"] == 30
    next_run = schedule["nextRunAt"]
    assert next_run is not None and next_run % 2000 == 0
    # Fires are made ahead as delayed jobs: the first is handed out at its time, not before.
    jobs = dq.pop(topic, count=10, wait=5)
    assert len(jobs) >= 1
    for job in jobs:
        fire = int(job["id"].rsplit("@", 1)[1])
        assert job["id"] == f"{name}@{fire}"
        assert job["dueAt"] == fire
        assert fire <= time.time() * 1000 + 1000
        assert job["body"] == {"n": 1}
    assert dq.get_schedule(name)["name"] == name
    dq.delete_schedule(name)
    with pytest.raises(delayq.DelayqError) as gone:
        dq.get_schedule(name)
    assert (gone.value.code, gone.value.status) == ("schedule_not_found", 404)


def test_list_schedules_pages_by_name_and_paused_makes_nothing(
    dq: delayq.Client, topic: str
) -> None:
    names = [f"{topic}-a", f"{topic}-b"]
    for name in names:
        paused = dq.put_schedule(name, "* * * * * *", topic, paused=True)
        assert paused["nextRunAt"] is None
    page = dq.list_schedules(cursor=f"{topic}-", limit=1)
    assert [s["name"] for s in page["schedules"]] == names[:1]
    assert page.get("cursor") == names[0]
    assert page["hasMore"] is True
    rest = dq.list_schedules(cursor=page["cursor"], limit=1)
    assert [s["name"] for s in rest["schedules"]] == names[1:]
    assert dq.pop(topic, count=10) == []
    for name in names:
        dq.delete_schedule(name)


def test_a_bad_cron_or_time_zone_is_invalid_request_naming_it(
    dq: delayq.Client, topic: str
) -> None:
    with pytest.raises(delayq.DelayqError) as bad_cron:
        dq.put_schedule(f"{topic}-x", "every minute", topic)
    assert bad_cron.value.code == "invalid_request"
    assert "cron" in str(bad_cron.value)
    with pytest.raises(delayq.DelayqError) as bad_zone:
        dq.put_schedule(f"{topic}-x", "* * * * *", topic, timezone="Mars/Olympus")
    assert bad_zone.value.code == "invalid_request"
    assert "timezone" in str(bad_zone.value)
