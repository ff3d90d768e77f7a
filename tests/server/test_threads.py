"""Threads (contextId): identifiers carried across tool calls, session context, persistence
across restarts, expiry, conversation-state TTL and cleanup metric, the state size cap."""

from __future__ import annotations

import random
import string
import time
from pathlib import Path

import httpx
import pytest

from lamina.errors import ErrorCode, LaminaError
from lamina.threads.packing import pack
from tests.server.harness import (
    HEADERS,
    result_of,
    rpc,
    running_server,
    send,
    server_settings,
    session_of,
    text_message,
    tool_message,
)


def test_a_thread_keeps_identifiers_and_starts_with_session_context(tmp_path: Path) -> None:
    with (
        running_server(server_settings(tmp_path / "d")) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        send(
            client,
            tool_message(
                "memory_add",
                {"content": "Bob deploys on Fridays", "layer": "user", "user_id": "bob"},
            ),
        )
        first = send(
            client,
            text_message("when does Bob deploy?", metadata={"user_id": "bob", "project_id": "web"}),
        )
        context = session_of(first)
        assert context["identifiers"] == {"user_id": "bob", "project_id": "web"}
        assert any("Fridays" in m["content"] for m in context["memories"])
        assert [c["policy_id"] for c in context["constraints"]] == ["builtin-secrets"]
        assert context["constraints_layer"] == {"layer": "project", "layer_id": "web"}
        thread = first["contextId"]
        # Later calls in the thread use its identifiers: no user_id needed, no new context.
        later = send(client, tool_message("memory_list", {}, contextId=thread))
        assert later["status"]["state"] == "TASK_STATE_COMPLETED", later["status"]
        assert [m["content"] for m in result_of(later)["items"]] == ["Bob deploys on Fridays"]
        assert session_of(later) is None
        # A one-shot tool call does only its work: no session context unless it asks.
        one_shot = send(client, tool_message("memory_list", {}, metadata={"user_id": "bob"}))
        assert one_shot["status"]["state"] == "TASK_STATE_COMPLETED"
        assert session_of(one_shot) is None
        asked = send(
            client,
            tool_message("memory_list", {}, metadata={"user_id": "bob", "session_context": True}),
        )
        assert session_of(asked)["identifiers"] == {"user_id": "bob"}
        state = live.run(live.server.threads.get("default", thread))
        assert state.identifiers == {"user_id": "bob", "project_id": "web"}
        turns = state.conversation_context["turns"]
        assert [t["tool"] for t in turns] == [None, "memory_list"]
        assert state.to_dict()["thread_id"] == thread
    # A new server on the same data recovers the thread and continues it.
    with (
        running_server(server_settings(tmp_path / "d")) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        assert live.server.metrics.threads_active._value.get() >= 2
        again = send(client, tool_message("memory_search", {"query": "deploy"}, contextId=thread))
        assert again["status"]["state"] == "TASK_STATE_COMPLETED"
        assert result_of(again)["results"][0]["memory"]["content"] == "Bob deploys on Fridays"


def test_expired_threads_and_state_are_cleaned_and_counted(tmp_path: Path) -> None:
    # TTLs of seconds, not fractions: on a loaded machine one request can take most of a second.
    settings = server_settings(tmp_path / "d", thread_ttl=5.0, state_ttl=2.0, expired_retention=0)
    with running_server(settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        old = send(client, tool_message("memory_list", {"user_id": "u"}))
        # Continued once: a thread with a row (a one-shot's is kept in its task, whose
        # context holds nothing the task does not).
        send(client, tool_message("memory_list", {}, contextId=old["contextId"]))
        kept = send(client, tool_message("memory_list", {"user_id": "u"}))
        time.sleep(2.5)
        send(client, tool_message("memory_list", {}, contextId=kept["contextId"]))
        counts = live.run(live.server.threads.cleanup())
        assert counts.states_removed >= 1
        time.sleep(3.0)
        # The old thread is idle past its TTL: continuing it is a clear protocol error.
        body = rpc(
            client,
            "SendMessage",
            {"message": tool_message("memory_list", {"user_id": "u"}, contextId=old["contextId"])},
        )
        assert body["error"]["code"] == -32602
        assert body["error"]["data"][0]["metadata"]["code"] == "THREAD_EXPIRED"
        assert "expired" in body["error"]["message"]
        counts = live.run(live.server.threads.cleanup())
        assert counts.threads_purged >= 1 and counts.tasks_purged >= 1
        metrics = client.get("/metrics").text
        assert 'a2a_thread_cleanup_total{kind="states_removed"}' in metrics
        purged = [
            line
            for line in metrics.splitlines()
            if line.startswith('a2a_thread_cleanup_total{kind="threads_purged"}')
        ]
        assert float(purged[0].split()[-1]) >= 1
        # Its tasks went with it.
        assert rpc(client, "GetTask", {"id": old["id"]})["error"]["code"] == -32001


def test_state_over_the_cap_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    settings = server_settings(tmp_path / "d", max_state_bytes=6000, session_memories=0)
    with running_server(settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        first = send(
            client,
            tool_message("memory_add", {"content": "small", "layer": "user", "user_id": "u"}),
        )
        thread = first["contextId"]
        big = "x" * 8000
        task = send(
            client, tool_message("memory_add", {"content": big, "layer": "user"}, contextId=thread)
        )
        assert task["status"]["state"] == "TASK_STATE_REJECTED"
        error = task["status"]["message"]["parts"][1]["data"]["error"]
        assert error["code"] == "THREAD_STATE_TOO_LARGE"
        assert error["details"]["max_bytes"] == 6000
        items = result_of(
            send(client, tool_message("memory_list", {"user_id": "u"}, contextId=thread))
        )["items"]
        assert [m["content"] for m in items] == ["small"]  # the big one was not stored
        state = live.run(live.server.threads.get("default", thread))
        assert all(big not in str(t) for t in state.conversation_context["turns"])


def test_a_new_thread_whose_first_record_does_not_fit_is_still_created(tmp_path: Path) -> None:
    """A one-shot call in a new thread (the direct path writes the thread with the task)
    whose record is over the cap: refused as in a named thread, the thread and task exist."""
    settings = server_settings(tmp_path / "d", max_state_bytes=6000, session_memories=0)
    with running_server(settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        big = "x" * 8000
        task = send(client, tool_message("memory_add", {"content": big, "layer": "user"}))
        assert task["status"]["state"] == "TASK_STATE_REJECTED"
        message = task["status"]["message"]["parts"][0]["text"]
        assert "not remembered in the thread" in message
        assert rpc(client, "GetTask", {"id": task["id"]})["result"]["id"] == task["id"]
        thread = live.run(live.server.threads.get("default", task["contextId"]))
        assert thread is not None and thread.conversation_context == {}
        later = send(
            client,
            tool_message("memory_list", {"user_id": "u"}, **{"contextId": task["contextId"]}),
        )
        assert later["status"]["state"] == "TASK_STATE_COMPLETED"


def test_many_concurrent_requests_on_one_thread_lose_no_turn(tmp_path: Path) -> None:
    import concurrent.futures

    with running_server(server_settings(tmp_path / "d", session_memories=0)) as live:
        with httpx.Client(base_url=live.url, timeout=60) as client:
            thread = send(client, tool_message("memory_list", {"user_id": "u"}))["contextId"]

            def one(i: int) -> str:
                with httpx.Client(base_url=live.url, timeout=60) as c:
                    return str(
                        send(
                            c,
                            tool_message(
                                "memory_add",
                                {"content": f"parallel {i}", "layer": "user"},
                                contextId=thread,
                            ),
                        )["status"]["state"]
                    )

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                states = list(pool.map(one, range(12)))
        assert states == ["TASK_STATE_COMPLETED"] * 12
        state = live.run(live.server.threads.get("default", thread))
        assert len(state.conversation_context["turns"]) == 13
        with httpx.Client(base_url=live.url, headers=HEADERS) as client:
            tasks = rpc(client, "ListTasks", {"contextId": thread})["result"]
        assert tasks["totalSize"] == 13


def test_a_threads_identifiers_outlive_its_conversation_context(tmp_path: Path) -> None:
    """The context (session context, turns) expires after state_ttl; the identifiers the
    client opened the thread with live as long as the thread, through the cleanup job too."""
    settings = server_settings(tmp_path / "d", thread_ttl=3600.0, state_ttl=0.3)
    with running_server(settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        send(
            client,
            tool_message("memory_add", {"content": "Cy rides", "layer": "user", "user_id": "cy"}),
        )
        first = send(client, text_message("rides?", metadata={"user_id": "cy"}))
        thread = first["contextId"]
        time.sleep(0.5)
        counts = live.run(live.server.threads.cleanup())
        assert counts.states_removed >= 1
        state = live.run(live.server.threads.get("default", thread))
        assert "turns" not in state.conversation_context  # the context did expire
        assert state.identifiers == {"user_id": "cy"}
        later = send(client, tool_message("memory_list", {}, contextId=thread))
        assert later["status"]["state"] == "TASK_STATE_COMPLETED", later["status"]
        assert [m["content"] for m in result_of(later)["items"]] == ["Cy rides"]
        # Expiring the thread itself clears them.
    settings = server_settings(tmp_path / "d", thread_ttl=0.2, state_ttl=0.1)
    with running_server(settings) as live:
        time.sleep(0.3)
        live.run(live.server.threads.cleanup())
        raw = live.run(live.server.ms.store.threads.get_thread("default", thread))
        assert raw.expired and raw.identifiers == "{}" and raw.context == "{}"


def test_retention_is_bounded_by_size_too(tmp_path: Path) -> None:
    """Past server.max_tasks, the cleanup deletes the oldest finished tasks (a GetTask of
    one answers task-not-found); past server.max_threads, the least recently used threads;
    a task waiting on its client stays, and its thread."""
    settings = server_settings(tmp_path / "d", max_tasks=2, max_threads=3, session_memories=0)
    with running_server(settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        waiting = send(client, tool_message("memory_add", {"layer": "user", "user_id": "u"}))
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        done = [send(client, tool_message("memory_list", {"user_id": "u"})) for _ in range(3)]
        counts = live.run(live.server.threads.cleanup())
        # Each call's thread is kept with its task (no contextId): the two went with theirs,
        # and the two left are within server.max_threads.
        assert (counts.tasks_trimmed, counts.threads_trimmed) == (2, 0)
        for task in done[:2]:
            assert rpc(client, "GetTask", {"id": task["id"]})["error"]["code"] == -32001
        for task in (waiting, done[2]):
            assert rpc(client, "GetTask", {"id": task["id"]})["result"]["id"] == task["id"]
        assert live.run(live.server.threads.get("default", waiting["contextId"])) is not None
        assert live.run(live.server.threads.get("default", done[0]["contextId"])) is None
        metrics = client.get("/metrics").text
        assert 'a2a_thread_cleanup_total{kind="tasks_trimmed"} 2.0' in metrics
        assert 'a2a_thread_cleanup_total{kind="threads_trimmed"} 0.0' in metrics


def _words(seed: int) -> str:
    """Sixty made-up words: a text that compresses little."""
    rng = random.Random(seed)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=6)) for _ in range(60))


def test_retention_is_bounded_by_bytes_too(tmp_path: Path) -> None:
    """Past server.max_task_bytes of stored tasks, the cleanup deletes the oldest finished
    ones until the rest fit (a GetTask of one answers task-not-found); a task waiting on
    its client stays. A budget that is no positive number is a configuration error."""
    for bad in (0, -1, "lots"):
        with pytest.raises(LaminaError) as err:
            server_settings(tmp_path / "bad", max_task_bytes=bad)
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR
        assert "server.max_task_bytes" in err.value.message
    settings = server_settings(tmp_path / "d", max_task_bytes=1500, session_memories=0)
    with running_server(settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        waiting = send(client, tool_message("memory_add", {"layer": "user", "user_id": "u"}))
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        done = [
            send(
                client,
                tool_message("memory_add", {"content": _words(i), "layer": "user", "user_id": "u"}),
            )
            for i in range(4)
        ]
        counts = live.run(live.server.threads.cleanup())
        assert counts.tasks_trimmed >= 1 and counts.threads_trimmed == 0
        kept = [
            task["id"] for task in done if "result" in rpc(client, "GetTask", {"id": task["id"]})
        ]
        # The oldest went, the newest stayed, and so did the task waiting on its client.
        assert kept and kept == [task["id"] for task in done[len(done) - len(kept) :]]
        assert len(kept) < len(done)
        assert rpc(client, "GetTask", {"id": waiting["id"]})["result"]["id"] == waiting["id"]
        stored = live.run(
            live.server.ms.store.threads.list_tasks(
                "default", context_id=None, state=None, updated_after_ns=None, before=None, limit=99
            )
        )
        assert sum(len(pack(task.data)) for task in stored[0] if task.state != 6) <= 1500
