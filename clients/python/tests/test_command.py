"""The command protocol through Client.command: one command, or a list run in order."""

from __future__ import annotations

import uuid
from typing import Callable

import delayq


def test_single_commands_add_pop_finish_and_get(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    added = dq.command({"command": "add", "topic": topic, "id": jid("x"), "TTR": 60, "body": [1]})
    assert added == {"success": True, "error": "", "id": jid("x"), "created": True}
    again = dq.command({"command": "add", "topic": topic, "id": jid("x"), "body": [2]})
    assert again == {"success": True, "error": "", "id": jid("x"), "created": False}
    popped = dq.command({"command": "pop", "topic": topic})
    assert popped["success"] is True
    assert (popped.get("id"), popped.get("value")) == (jid("x"), [1])
    receipt = popped.get("receipt")
    assert isinstance(receipt, str) and receipt
    finished = dq.command({"command": "finish", "id": jid("x"), "receipt": receipt})
    assert finished["success"] is True
    got = dq.command({"command": "get", "id": jid("x")})
    assert got["value"]["state"] == "finished"
    assert got["value"]["ttr"] == 60
    empty = dq.command({"command": "pop", "topic": topic})
    assert empty == {"success": True, "error": ""}


def test_an_add_command_without_an_id_gets_one(dq: delayq.Client, topic: str) -> None:
    result = dq.command({"command": "add", "topic": topic, "body": "b", "delay": 30})
    assert result["success"] is True
    assert str(uuid.UUID(result["id"])) == result["id"]
    assert dq.get(result["id"])["state"] == "delayed"


def test_a_list_runs_in_order_and_a_failure_does_not_raise(
    dq: delayq.Client, topic: str, jid: Callable[[str], str]
) -> None:
    results = dq.command(
        [
            {"command": "add", "topic": topic, "id": jid("a"), "body": 1},
            {"command": "add", "topic": topic, "body": 2},
            {"command": "pop", "topic": topic},
            {"command": "delete", "id": jid("missing")},
            {"command": "release", "id": jid("a"), "delay": 30},
        ]
    )
    assert isinstance(results, list) and len(results) == 5
    assert [r["success"] for r in results] == [True, True, True, False, True]
    assert results[2].get("id") == jid("a") and results[2].get("value") == 1
    assert results[3]["error"].startswith("job_not_found: ")
    assert results[4]["value"]["state"] == "delayed"
    assert dq.topic(topic)["counts"] == {"delayed": 1, "ready": 1, "reserved": 0, "dead": 0}


def test_a_bad_lone_command_answers_success_false(dq: delayq.Client, topic: str) -> None:
    result = dq.command({"command": "add", "topic": topic, "TTR": 0})
    assert result["success"] is False
    assert result["error"].startswith("invalid_request: ")


def test_an_empty_list_is_refused_as_a_whole(dq: delayq.Client) -> None:
    try:
        dq.command([])
    except delayq.DelayqError as error:
        assert (error.code, error.status) == ("invalid_request", 400)
    else:
        raise AssertionError("an empty command list was accepted")
