"""Forgetting reaches every copy the A2A server keeps, on both stores: after memory_delete,
memory_delete_all, memory_delete_all with include_sessions (forget) and expiry, a memory's
text is in no answer of any door — GetTask, ListTasks (by thread too), SubscribeToTask, the
REST and 0.1 legacy routes, memory_history, export — and, on the embedded store, in no file
of the data directory once the server has stopped cleanly (in the write-ahead log as soon as
the deletion has returned); on PostgreSQL in no column of any table, at once."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from lamina.backend import Backend
from lamina.embeddings.local import LocalEmbedder
from lamina.store.postgres import PostgresStore
from lamina.store.sqlite import SQLiteStore
from lamina.threads.forgetting import FORGOTTEN, link_key, references
from lamina.threads.packing import stored_text
from tests.pg import empty_database, require_postgres, reset_database
from tests.server.harness import (
    HEADERS,
    Running,
    result_of,
    rpc,
    running_server,
    send,
    server_settings,
    sse_events,
    text_message,
    tool_message,
)

#: One distinctive word per kind of deletion, found nowhere else.
MARKERS = {
    "memory_delete": "zorblaxian",
    "memory_delete_all": "vexmorathic",
    "forget": "quandrilexa",
    "expiry": "plimbertova",
}
LIMITS = {"default": {"requests_per_minute": 10_000}}
KEPT = "Bob drinks green tea every morning"


def _tool(client: httpx.Client, tool: str, **arguments: Any) -> dict[str, Any]:
    return send(client, tool_message(tool, arguments))


def _streamed(client: httpx.Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call through the SDK's path (streaming): the task of its last event."""
    events = sse_events(client, "SendStreamingMessage", {"message": tool_message(tool, arguments)})
    last = events[-1]["result"]
    task_id = last["statusUpdate"]["taskId"] if "statusUpdate" in last else last["task"]["id"]
    got = rpc(client, "GetTask", {"id": task_id})
    task: dict[str, Any] = got["result"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return task


def _remember(
    client: httpx.Client, marker: str, user: str, session: str | None = None, **extra: Any
) -> dict[str, str]:
    """The marker's memory added (one-shot path), searched for (the SDK's path, the free-text
    path and the legacy route), read and its history asked for; the tasks' ids."""
    content = f"The {marker} key is under the blue flowerpot"
    who = {"user_id": user, **({"session_id": session} if session else {})}
    added = _tool(
        client,
        "memory_add",
        content=content,
        layer="session" if session else "user",
        **who,
        **extra,
    )
    memory_id = result_of(added)["id"]
    searched = _streamed(client, "memory_search", query=f"where is the {marker} key", **who)
    assert any(h["memory"]["id"] == memory_id for h in result_of(searched)["results"])
    free = send(client, text_message(f"{marker} key", metadata=who))
    assert marker in str(free)
    legacy = client.post(
        "/tasks/send",
        json={
            "id": f"legacy-{user}",
            "message": {
                "parts": [
                    {
                        "type": "data",
                        "data": {"tool": "memory_get", "arguments": {"memory_id": memory_id}},
                    }
                ]
            },
        },
    )
    assert legacy.status_code == 200 and marker in legacy.text, legacy.text
    history = _tool(client, "memory_history", memory_id=memory_id)
    assert marker in str(result_of(history))
    # A prompt assembled with the memory's text names it among its memories.
    prompt = _tool(client, "context_prompt", query=f"where is the {marker} key", **who)
    assert marker in result_of(prompt)["prompt"]
    assert memory_id in result_of(prompt)["memory_ids"]
    # A second call in the thread of the add: its record holds the memory too.
    again = send(
        client,
        tool_message("memory_get", {"memory_id": memory_id}, contextId=added["contextId"]),
    )
    return {
        "memory": memory_id,
        "added": added["id"],
        "searched": searched["id"],
        "free": free["id"],
        "history": history["id"],
        "prompt": prompt["id"],
        "again": again["id"],
        "thread": added["contextId"],
        "user": user,
    }


def _answers(client: httpx.Client, ids: dict[str, str]) -> dict[str, str]:
    """Every door's answer about the tasks and the memory, by door and task."""
    out: dict[str, str] = {}
    for key in ("added", "searched", "free", "history", "prompt", "again"):
        task_id = ids[key]
        out[f"GetTask {key}"] = str(rpc(client, "GetTask", {"id": task_id}))
        out[f"REST {key}"] = client.get(f"/tasks/{task_id}", headers=HEADERS).text
        out[f"0.1 {key}"] = client.get(f"/tasks/{task_id}/get").text
        out[f"SubscribeToTask {key}"] = str(sse_events(client, "SubscribeToTask", {"id": task_id}))
    out["0.1 legacy task"] = client.get(f"/tasks/legacy-{ids['user']}/get").text
    out["ListTasks"] = str(rpc(client, "ListTasks", {"pageSize": 100}))
    thread = {"contextId": ids["thread"], "pageSize": 100}
    out["ListTasks thread"] = str(rpc(client, "ListTasks", thread))
    out["memory_history"] = str(_tool(client, "memory_history", memory_id=ids["memory"]))
    out["memory_get"] = str(_tool(client, "memory_get", memory_id=ids["memory"]))
    return {door: text.lower() for door, text in out.items()}


def _exported(live: Running) -> str:
    async def records() -> list[dict[str, Any]]:
        return [r async for r in live.server.ms.memory.export(history=True)]

    return str(live.run(records()))


def _files(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data)): p.read_bytes() for p in data.rglob("*") if p.is_file()}


def _in_files(data: Path, words: list[str], only: str | None = None) -> list[tuple[str, str]]:
    found = []
    for name, raw in _files(data).items():
        if only is not None and name != only:
            continue
        lowered = raw.lower()
        found += [(name, w) for w in words if w.encode() in lowered]
    return found


def _in_tables(url: str, words: list[str]) -> list[tuple[str, str]]:
    found = []
    with psycopg.connect(url) as conn:  # the owner: row-level security does not apply
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        ]
        assert "a2a_tasks" in tables and "a2a_task_links" in tables
        for table in tables:
            text = "\n".join(
                r[0] for r in conn.execute(f'SELECT t::text FROM "{table}" t').fetchall()
            ).lower()
            found += [(table, w) for w in words if w in text]
        tasks = conn.execute("SELECT data, packed FROM a2a_tasks").fetchall()
    return found + _in_tasks(tasks, words)


def _in_tasks(rows: list[Any], words: list[str]) -> list[tuple[str, str]]:
    """The words found in the stored tasks' JSON (packed: compressed, not found by reading
    the bytes)."""
    text = "\n".join(stored_text(data, packed) for data, packed in rows).lower()
    return [("a2a_tasks (unpacked)", w) for w in words if w in text]


def _sqlite_tasks(path: Path) -> list[Any]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT data, packed FROM a2a_tasks").fetchall()


#: Long enough for the memory to be read back through the server on a loaded machine.
#: Times to live tried in turn: the marker's memory must be read back through every door
#: before it expires, which a loaded machine may not do within the first.
TTLS = (3.0, 8.0, 20.0)


def _remember_for_a_while(
    client: httpx.Client, marker: str, user: str, session: str | None
) -> tuple[dict[str, str], float]:
    """The marker remembered with a time to live (the first of TTLS long enough to read it
    back through every door); its tasks' ids and when it expires (monotonic clock)."""
    for ttl in TTLS[:-1]:
        started = time.monotonic()
        with contextlib.suppress(AssertionError):  # expired before it was read back
            return _remember(client, marker, user, session, ttl=ttl), started + ttl
    started = time.monotonic()
    return _remember(client, marker, user, session, ttl=TTLS[-1]), started + TTLS[-1]


def _delete(
    kind: str, client: httpx.Client, live: Running, ids: dict[str, str], expires: float
) -> None:
    if kind == "memory_delete":
        deleted = _tool(client, "memory_delete", memory_id=ids["memory"])
        assert result_of(deleted)["existed"] is True
    elif kind == "memory_delete_all":
        assert result_of(_tool(client, "memory_delete_all", user_id=ids["user"]))["deleted"] == 1
    elif kind == "forget":
        done = _tool(client, "memory_delete_all", user_id=ids["user"], include_sessions=True)
        assert result_of(done)["deleted"] == 1 and result_of(done)["sessions"] == ["trip"]
    else:  # the memory was read back before its time to live (TTL) was over
        time.sleep(max(0.0, expires - time.monotonic()) + 0.1)
        # An earlier try that expired too soon left a memory of the marker to purge too.
        assert live.run(live.server.ms.memory.purge_expired()) >= 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_kind_of_deletion_reaches_every_copy(backend: str, tmp_path: Path) -> None:
    overrides: dict[str, Any] = {"memory": {"expiry_interval": 0}}
    url = ""
    if backend == "postgres":
        url = require_postgres()
        empty_database(url)
        overrides["database_url"] = url
    data = tmp_path / "data"
    settings = server_settings(data, tiers=LIMITS, _settings=overrides)
    gone: list[str] = []
    users = {"memory_delete": "alice", "memory_delete_all": "carol", "forget": "dave"}
    for kind, marker in MARKERS.items():
        # One server per kind of deletion, on the same data: the files are read once it has
        # stopped, with every marker deleted so far.
        with (
            running_server(settings) as live,
            httpx.Client(base_url=live.url, timeout=30) as client,
        ):
            if not gone:
                _tool(client, "memory_add", content=KEPT, layer="user", user_id="bob")
            user = users.get(kind, "erin")
            session = "trip" if kind == "forget" else None
            expires = 0.0
            if kind == "expiry":
                ids, expires = _remember_for_a_while(client, marker, user, session)
            else:
                ids = _remember(client, marker, user, session)
            session_tasks: list[str] = []
            if kind == "forget":
                said = [{"role": "user", "content": f"my {marker} story"}]
                appended = _tool(client, "session_append", session_key="trip", messages=said)
                read = _tool(client, "session_messages", session_key="trip")
                assert marker in str(result_of(read))
                session_tasks = [appended["id"], read["id"]]
            _delete(kind, client, live, ids, expires)
            gone.append(marker)

            answers = _answers(client, ids)
            for task_id in session_tasks:
                answers[task_id] = str(rpc(client, "GetTask", {"id": task_id})).lower()
            assert [(d, m) for d, a in answers.items() for m in gone if m in a] == [], kind
            # The tasks are still there, their text is not.
            assert "'deleted': true" in answers["GetTask added"]
            assert FORGOTTEN in answers["GetTask free"]
            assert FORGOTTEN in answers["GetTask prompt"]
            exported = _exported(live).lower()
            assert [m for m in gone if m in exported] == [] and KEPT.lower() in exported
            if backend == "sqlite":  # the log was emptied after the delete
                assert _in_files(data, gone, "lamina.db-wal") == [], kind
                tasks = _sqlite_tasks(data / "lamina.db")
                assert _in_tasks(tasks, gone) == [], kind
                assert _in_tasks(tasks, [KEPT.lower()]) != []  # the scan reads the tasks
            else:
                assert _in_tables(url, gone) == [], kind
        # Stopped cleanly: nothing of the text is left in any file.
        if backend == "sqlite":
            files = _files(data)
            assert "lamina.db" in files and KEPT.lower().encode() in files["lamina.db"].lower()
            assert _in_files(data, gone) == [], kind
            assert _in_tasks(_sqlite_tasks(data / "lamina.db"), gone) == [], kind
        else:
            assert _in_tables(url, gone) == [], kind


_OLD_TASK = (
    '{"id":"t-1","contextId":"c-1","history":[{"messageId":"x","role":"ROLE_USER",'
    '"parts":[{"data":{"tool":"memory_search","arguments":{"query":"q"}}}],'
    '"metadata":{"session_id":"s-1"}}],"artifacts":[{"artifactId":"a","parts":[{"data":'
    '{"results":[{"memory":{"id":"m-1","content":"c"}}]}}]}]}'
)


async def _open_and_close(store: Backend) -> None:
    """Open the store (migrating it) and close it, on one event loop."""
    await store.initialize()
    await store.shutdown()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_tasks_stored_before_the_index_are_indexed_by_the_migration(
    backend: str, tmp_path: Path
) -> None:
    """Tasks stored by the schema before the index are indexed as a new one would be."""
    embedder = LocalEmbedder()
    insert = "INSERT INTO a2a_tasks VALUES ('default', 't-1', 'c-1', 3, 1, %s)"
    if backend == "sqlite":
        path = tmp_path / "old.db"
        old: Backend = SQLiteStore(path, embedder, schema_target=9)
    else:
        url = require_postgres()
        reset_database(url)
        old = PostgresStore(url, embedder, schema_target=17)
    asyncio.run(_open_and_close(old))
    select = (
        "SELECT l.ref, k.task_id FROM a2a_task_links l JOIN a2a_tasks k "
        "ON k.tenant_id = l.tenant_id AND k.ref_key = l.task ORDER BY 1, 2"
    )
    if backend == "sqlite":
        with sqlite3.connect(path) as conn:
            conn.execute(insert.replace("%s", "?"), (_OLD_TASK,))
        new: Backend = SQLiteStore(path, embedder)
        asyncio.run(_open_and_close(new))
        with sqlite3.connect(path) as conn:
            refs = conn.execute(select).fetchall()
    else:
        with psycopg.connect(url) as conn:  # the owner: row-level security does not apply
            conn.execute(insert, (_OLD_TASK,))
        new = PostgresStore(url, embedder)
        asyncio.run(_open_and_close(new))
        with psycopg.connect(url) as conn:
            refs = conn.execute(select).fetchall()
    assert refs == sorted([(link_key("memory", "m-1"), "t-1"), (link_key("session", "s-1"), "t-1")])
    assert references(_OLD_TASK) == {("memory", "m-1"), ("session", "s-1")}
