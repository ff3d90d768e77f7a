"""Forgetting, on every store: after ``delete`` and ``delete_where`` no trace of the text is
left anywhere in the database (read from the raw tables, every column of every table:
memories, history, postings, the embedding cache, neighbourhood columns), while history
keeps that the memory existed, who deleted it and when."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina.memory.layers import MemoryLayer
from lamina.memory.models import HistoryOperation
from lamina.memory.ports import NewMemory, Scope, Selection
from lamina.memory.timing import Lifetime
from lamina.store.sql.dialect import CHUNK
from lamina.store.sql.embedding_cache import content_hash
from lamina.store.sqlite import SQLiteStore
from lamina.threads.forgetting import FORGOTTEN
from lamina.threads.packing import stored_text
from lamina.threads.ports import NewThread, StoredTask
from tests.conformance.conftest import Harness
from tests.conformance.test_store import scope
from tests.pg import PG_URL

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

T1, T2 = "tenant-one", "tenant-two"
#: Words found nowhere else: their stems too (postings, lexicon, context).
SECRET = "Quixotrel zephyrnox lives at Vambrelle street"
REWRITTEN = "Quixotrel moved to Glimmerwick harbour"
MARKERS = ("quixotrel", "zephyrnox", "vambrell", "glimmerwick")


def add(
    h: Harness,
    content: str,
    *,
    tenant: str = T1,
    sc: Scope | None = None,
    metadata: dict[str, Any] | None = None,
) -> str:
    vector = h.run(h.store.memories.embeddings.generate_embedding(tenant, [content]))[0]
    memory = NewMemory(str(uuid.uuid4()), tenant, sc or scope(), content, metadata or {}, vector)
    return h.run(h.store.memories.writes.add(memory, actor="writer")).id


def message(h: Harness, content: str, position_of: str, speaker: str = "alice") -> NewMemory:
    vector = h.run(h.store.memories.embeddings.generate_embedding(T1, [content]))[0]
    conversation = {"id": position_of, "speaker": speaker, "role": "user"}
    return NewMemory(
        str(uuid.uuid4()), T1, scope(), content, {"conversation": conversation}, vector
    )


def raw_text(h: Harness, tmp_path: Path) -> str:
    """Every value of every table of the database, as text (lower-cased)."""
    out: list[str] = []
    if isinstance(h.store, SQLiteStore):
        with sqlite3.connect(tmp_path / "conformance.db") as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            for table in tables:
                for values in conn.execute(f'SELECT * FROM "{table}"'):
                    out += [_text(v) for v in values]
            tasks = conn.execute("SELECT data, packed FROM a2a_tasks").fetchall()
    else:
        with psycopg.connect(PG_URL) as conn:  # the owner: row-level security does not apply
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                ).fetchall()
            ]
            for table in tables:
                for (values,) in conn.execute(f'SELECT t::text FROM "{table}" t').fetchall():
                    out.append(values)
            tasks = conn.execute("SELECT data, packed FROM a2a_tasks").fetchall()
    # The tasks' JSON is stored compressed: read it as the store does.
    out += [stored_text(data, packed) for data, packed in tasks]
    return "\n".join(out).lower()


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


def cached_hashes(h: Harness, tmp_path: Path) -> set[str]:
    if isinstance(h.store, SQLiteStore):
        with sqlite3.connect(tmp_path / "conformance.db") as conn:
            return {r[0] for r in conn.execute("SELECT content_hash FROM embedding_cache")}
    with psycopg.connect(PG_URL) as conn:
        return {r[0] for r in conn.execute("SELECT content_hash FROM embedding_cache").fetchall()}


def test_delete_leaves_no_trace_of_the_text(harness: Harness, tmp_path: Path) -> None:
    h = harness
    kept = add(h, "Bob drinks green tea every morning")
    mid = add(h, SECRET, metadata={"street": "Vambrelle", "tags": ["zephyrnox"]})
    # The memory holds its vector: no copy in the cache (issue 35).
    assert content_hash(SECRET) not in cached_hashes(h, tmp_path)
    rewritten = h.run(h.store.memories.embeddings.generate_embedding(T1, [REWRITTEN]))[0]
    assert content_hash(REWRITTEN) in cached_hashes(h, tmp_path)  # not held yet
    h.run(
        h.store.memories.writes.update(
            T1, mid, content=REWRITTEN, embedding=rewritten, metadata_patch={"note": "glimmerwick"}
        )
    )
    before = raw_text(h, tmp_path)
    assert all(marker in before for marker in MARKERS)  # the old text lives on in history
    # Neither text is cached: the old one is held by no memory, the new one by the memory.
    assert content_hash(SECRET) not in cached_hashes(h, tmp_path)
    assert content_hash(REWRITTEN) not in cached_hashes(h, tmp_path)

    assert h.run(h.store.memories.writes.delete(T1, mid, actor="dpo")) is True

    after = raw_text(h, tmp_path)
    assert [m for m in MARKERS if m in after] == []
    hashes = cached_hashes(h, tmp_path)
    assert content_hash(SECRET) not in hashes and content_hash(REWRITTEN) not in hashes
    # The other memory's vector is found through it, as before the delete.
    found = h.run(
        h.store.memories.embeddings.generate_embedding(T1, ["Bob drinks green tea every morning"])
    )[0]
    assert h.run(h.store.memories.reads.get(T1, kept)) is not None and found is not None
    events = h.run(h.store.memories.reads.history(T1, mid))
    assert [(e.operation.value, e.actor) for e in events] == [
        ("add", "writer"),
        ("update", None),
        ("delete", "dpo"),
    ]
    assert all(
        e.old_content is e.new_content is e.old_metadata is e.new_metadata is None for e in events
    )
    assert events[-1].layer is MemoryLayer.USER and events[-1].at >= events[0].at
    # The other memory keeps its text and history.
    assert h.run(h.store.memories.reads.get(T1, kept)) is not None
    assert (
        h.run(h.store.memories.reads.history(T1, kept))[0].new_content
        == "Bob drinks green tea every morning"
    )


def test_a_vector_another_memory_holds_stays_found(harness: Harness, tmp_path: Path) -> None:
    """Deleting one of two memories holding a text leaves its vector with the other (found
    through it); deleting the last leaves no vector of it in the tenant, the other tenant's
    memory keeps its own. (The cache holds no copy of a stored memory's vector: issue 35.)"""
    h = harness
    text = "Shared words about quixotrel"
    first, second = add(h, text), add(h, text, sc=scope(user_id="bob"))
    other_tenant = add(h, text, tenant=T2)
    assert cached_hashes(h, tmp_path) == set()
    h.run(h.store.memories.writes.delete(T1, first))
    assert "quixotrel" in raw_text(h, tmp_path)  # the second memory holds it
    h.run(h.store.memories.writes.delete(T1, second))
    assert h.run(h.store.memories.reads.get(T2, other_tenant)) is not None
    assert cached_hashes(h, tmp_path) == set()
    with_t2 = h.run(
        h.store.memories.embeddings.generate_embedding(T2, [text])
    )  # found through T2's memory
    assert with_t2 is not None and cached_hashes(h, tmp_path) == set()


def test_deleted_turns_leave_no_words_in_their_neighbours(harness: Harness, tmp_path: Path) -> None:
    h = harness
    turns = [
        message(h, "We met at the bakery", "talk-1"),
        message(h, "The password hint is zephyrnox quixotrel", "talk-1", "bob"),
        message(h, "Then we walked home", "talk-1"),
        message(h, "It rained all evening", "talk-1", "bob"),
    ]
    stored = h.run(h.store.memories.writes.add_messages(turns))
    assert "zephyrnox" in raw_text(h, tmp_path)
    assert h.run(h.store.memories.writes.delete(T1, stored[1].id)) is True
    assert [m for m in MARKERS if m in raw_text(h, tmp_path)] == []
    # Continuing the conversation still works and numbers on.
    more = h.run(h.store.memories.writes.add_messages([message(h, "Good night", "talk-1")]))
    assert more[0].metadata["conversation"]["position"] == 4


def test_delete_where_selects_by_identifiers(harness: Harness, tmp_path: Path) -> None:
    h = harness
    alice = [
        add(h, "Alice quixotrel user memory"),
        add(h, "Alice agent memory", sc=scope(MemoryLayer.AGENT, agent_id="bot", user_id="alice")),
        add(
            h,
            "Alice session memory",
            sc=scope(MemoryLayer.SESSION, session_id="s1", user_id="alice"),
        ),
    ]
    others = [
        add(h, "Bob user memory", sc=scope(user_id="bob")),
        add(h, "Bob agent memory", sc=scope(MemoryLayer.AGENT, agent_id="bot", user_id="bob")),
        add(h, "Project memory", sc=scope(MemoryLayer.PROJECT, project_id="alice")),
        add(h, "Alice in another tenant", tenant=T2),
    ]
    # Only the agent layer: one memory; count_where counts what delete_where deletes.
    one = Selection((MemoryLayer.AGENT,), {"user_id": "alice"})
    assert h.run(h.store.memories.forgetting.count_where(T1, one)) == 1
    assert (
        h.run(h.store.memories.forgetting.count_where(T1, Selection((), {"user_id": "alice"}))) == 3
    )
    assert (
        h.run(h.store.memories.forgetting.count_where(T1, Selection((), {"agent_id": "bot"}))) == 2
    )
    assert (
        h.run(h.store.memories.forgetting.count_where(T2, Selection((), {"user_id": "alice"}))) == 1
    )
    nothing = Selection((MemoryLayer.PROJECT,), {"user_id": "alice"})
    assert h.run(h.store.memories.forgetting.count_where(T1, nothing)) == 0
    assert h.run(h.store.memories.forgetting.delete_where(T1, one, actor="dpo")) == 1
    assert h.run(h.store.memories.reads.get(T1, alice[1])) is None
    # Every layer: the rest of alice's, nothing else.
    assert (
        h.run(h.store.memories.forgetting.delete_where(T1, Selection((), {"user_id": "alice"})))
        == 2
    )
    assert (
        h.run(h.store.memories.forgetting.delete_where(T1, Selection((), {"user_id": "alice"})))
        == 0
    )
    assert all(h.run(h.store.memories.reads.get(T1, m)) is None for m in alice)
    assert all(h.run(h.store.memories.reads.get(T1, m)) is not None for m in others[:3])
    assert h.run(h.store.memories.reads.get(T2, others[3])) is not None
    assert "quixotrel" not in raw_text(h, tmp_path)
    assert h.run(h.store.memories.reads.history(T1, alice[1]))[-1].actor == "dpo"
    # An agent: across users; a session id with another key: nothing.
    assert (
        h.run(h.store.memories.forgetting.delete_where(T1, Selection((), {"agent_id": "bot"}))) == 1
    )
    assert (
        h.run(h.store.memories.forgetting.delete_where(T1, Selection((), {"session_id": "s1"})))
        == 0
    )
    # Identifiers no layer is scoped by together select nothing.
    assert (
        h.run(
            h.store.memories.forgetting.delete_where(
                T1, Selection((), {"project_id": "alice", "user_id": "bob"})
            )
        )
        == 0
    )
    assert (
        h.run(h.store.memories.forgetting.delete_where(T1, Selection((), {"project_id": "alice"})))
        == 1
    )


def _session(h: Harness, key: str, words: str, tenant: str = T1) -> None:
    """A session with messages, an observation, a reflection, graph relations and a lease."""
    from lamina.observational.ports import NewGraph, NewMessage, NewNote

    s = h.store.sessions
    messages = [NewMessage("user", f"{words} said hello", 3), NewMessage("assistant", "ok", 1)]
    h.run(s.append_messages(tenant, key, messages))
    h.run(s.add_note(tenant, key, NewNote(f"observed {words}", 2, 0, (0, 1))))
    h.run(s.add_note(tenant, key, NewNote(f"reflected {words}", 2, 1, (0, 1))))
    h.run(s.add_graph(tenant, key, NewGraph([], [(f"{words} person", "likes", "tea")])))
    assert h.run(s.acquire_lease(tenant, key, "worker", 60.0))


def _session_rows(h: Harness, tmp_path: Path) -> dict[str, list[tuple[str, str]]]:
    """(tenant, session key) of every row of the session tables, read from the raw tables."""
    tables = ("session_messages", "observations", "reflections", "graph_relations")
    tables += ("session_leases",)
    out: dict[str, list[tuple[str, str]]] = {}
    if isinstance(h.store, SQLiteStore):
        with sqlite3.connect(tmp_path / "conformance.db") as conn:
            for table in tables:
                out[table] = sorted(
                    conn.execute(f"SELECT tenant_id, session_key FROM {table}").fetchall()
                )
            names = conn.execute("SELECT norm FROM graph_entities").fetchall()
    else:
        with psycopg.connect(PG_URL) as conn:
            for table in tables:
                out[table] = sorted(
                    conn.execute(f"SELECT tenant_id, session_key FROM {table}").fetchall()
                )
            names = conn.execute("SELECT norm FROM graph_entities").fetchall()
    out["graph_entities"] = sorted((str(n[0]), "") for n in names)
    return out


def test_forget_where_takes_the_sessions_of_the_memories(harness: Harness, tmp_path: Path) -> None:
    h = harness
    add(h, "Alice quixotrel user memory")
    add(h, "Alice first session", sc=scope(MemoryLayer.SESSION, session_id="s1", user_id="alice"))
    add(h, "Alice second session", sc=scope(MemoryLayer.SESSION, session_id="s2", user_id="alice"))
    add(h, "Bob session memory", sc=scope(MemoryLayer.SESSION, session_id="s3", user_id="bob"))
    _session(h, "s1", "zephyrnox")
    _session(h, "s2", "vambrelle")
    _session(h, "s-named", "glimmerwick")  # no memory names it: only given
    _session(h, "s3", "bobby")
    _session(h, "s1", "othertenant", tenant=T2)
    before = raw_text(h, tmp_path)
    assert all(m in before for m in ("zephyrnox", "vambrelle", "glimmerwick"))

    done = h.run(
        h.store.memories.forgetting.forget_where(
            T1, Selection((), {"user_id": "alice"}), session_keys=["s-named"], actor="dpo"
        )
    )
    assert done.memories == 3
    assert done.sessions == ["s-named", "s1", "s2"]
    assert (done.session_messages, done.observations, done.reflections) == (6, 3, 3)
    assert done.graph_relations == 3

    left = _session_rows(h, tmp_path)
    for table in ("session_messages", "observations", "reflections", "graph_relations"):
        assert {k for _, k in left[table] if _ == T1} == {"s3"}, table
        assert {k for t, k in left[table] if t == T2} == {"s1"}, table
    assert left["session_leases"] == [(T1, "s3"), (T2, "s1")]
    # Entities only the forgotten sessions used are gone; shared ones ("tea") stay.
    entities = {n for n, _ in left["graph_entities"]}
    assert "tea" in entities and "bobby person" in entities
    assert not {"zephyrnox person", "vambrelle person", "glimmerwick person"} & entities
    after = raw_text(h, tmp_path)
    assert [m for m in ("quixotrel", "zephyrnox", "vambrelle", "glimmerwick") if m in after] == []
    assert "bobby" in after and "othertenant" in after
    # Again: nothing left to delete, the sessions given are still reported.
    again = h.run(h.store.memories.forgetting.forget_where(T1, Selection((), {"user_id": "alice"})))
    assert (again.memories, again.sessions, again.session_messages) == (0, [], 0)


def _task(task_id: str, request: dict[str, Any], result: Any, **extra: Any) -> StoredTask:
    """An A2A task as the server stores it (protobuf's JSON): a tool call and its result."""
    task = {
        "id": task_id,
        "contextId": "thread-1",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-27T10:00:00Z"},
        "artifacts": [{"artifactId": "a-" + task_id, "parts": [{"data": result}]}],
        "history": [
            {"messageId": "m-" + task_id, "role": "ROLE_USER", "parts": [{"data": request}]}
        ],
        **extra,
    }
    return StoredTask(task_id, "thread-1", 3, 1, json.dumps(task))


def _hit(memory_id: str, content: str) -> dict[str, Any]:
    return {"memory": {"id": memory_id, "content": content}, "score": 0.5}


def test_forgetting_rewrites_the_tasks_and_threads_that_held_the_text(
    harness: Harness, tmp_path: Path
) -> None:
    """Each way of forgetting (delete, delete_where, forget_where's sessions, expiry) rewrites
    the A2A tasks referring to what it forgets, and their threads' records, in its
    transaction: the other results and other tenants' tasks stay whole."""
    h, t = harness, harness.store.threads
    kept = add(h, "Bob drinks green tea every morning")
    gone = add(h, SECRET)
    listed = add(h, "Vambrelle harbour opens at nine")
    later = add(h, "Glimmerwick bakery closes at noon", sc=scope(user_id="bob"))
    expiring = NewMemory(
        str(uuid.uuid4()),
        T1,
        scope(user_id="erin"),
        "Zephyrnox lantern story",
        {},
        h.run(h.store.memories.embeddings.generate_embedding(T1, ["Zephyrnox lantern story"]))[0],
        lifetime=Lifetime(expires_at=datetime.now(UTC) + timedelta(seconds=1)),
    )
    expired = h.run(h.store.memories.writes.add(expiring)).id
    context = {
        "identifiers": {"user_id": "alice"},
        "session_context": {"memories": [{"id": gone, "content": SECRET}]},
        "turns": [
            {
                "at": 1.0,
                "task": "t-add",
                "tool": "memory_add",
                "arguments": {"content": SECRET},
                "result": f'{{"id": "{gone}", "content": "{SECRET}"}}',
            },
            {"at": 2.0, "task": "t-other", "tool": "memory_get", "arguments": {}, "result": "x"},
        ],
    }
    thread = NewThread("thread-1", 1.0, json.dumps(context), None, 1)
    add_call = {"tool": "memory_add", "arguments": {"content": SECRET}, "user_id": "alice"}
    h.run(t.create_thread(T1, thread, _task("t-add", add_call, {"id": gone, "content": SECRET})))
    search = {"tool": "memory_search", "arguments": {"query": "quixotrel"}}
    hits = {"results": [_hit(kept, "Bob drinks green tea every morning"), _hit(gone, SECRET)]}
    h.run(t.save_task(T1, _task("t-search", search, hits)))
    h.run(
        t.save_task(
            T1,
            _task(
                "t-list",
                {"tool": "memory_list"},
                [{"id": listed, "content": "Vambrelle harbour opens at nine"}],
            ),
        )
    )
    h.run(
        t.save_task(
            T1,
            _task(
                "t-later",
                {"tool": "memory_get"},
                {"id": later, "content": "Glimmerwick bakery closes at noon"},
            ),
        )
    )
    h.run(
        t.save_task(
            T1,
            _task(
                "t-expired",
                {"tool": "memory_get"},
                {"id": expired, "content": "Zephyrnox lantern story"},
            ),
        )
    )
    session = {
        "tool": "session_append",
        "arguments": {"session_key": "s9", "messages": [{"content": "Quixotrel said hi"}]},
    }
    h.run(
        t.save_task(
            T1,
            _task("t-session", session, {"messages": [{"id": 1, "content": "Quixotrel said hi"}]}),
        )
    )
    # Another tenant's task naming the same memory id keeps its text.
    h.run(t.save_task(T2, _task("t-add", add_call, {"id": gone, "content": SECRET})))

    assert h.run(h.store.memories.writes.delete(T1, gone)) is True
    searched = json.loads(h.run(t.get_task(T1, "t-search")).data)
    results = searched["artifacts"][0]["parts"][0]["data"]["results"]
    assert results == [
        _hit(kept, "Bob drinks green tea every morning"),
        {"memory": {"id": gone, "deleted": True}, "score": 0.5},
    ]
    assert searched["history"][0]["parts"][0]["data"] == {"tool": "memory_search", "arguments": {}}
    added = json.loads(h.run(t.get_task(T1, "t-add")).data)
    assert added["artifacts"][0]["parts"][0]["data"] == {"id": gone, "deleted": True}
    assert added["history"][0]["parts"][0]["data"] == {
        "user_id": "alice",
        "tool": "memory_add",
        "arguments": {},
    }
    assert added["status"]["state"] == "TASK_STATE_COMPLETED"
    record = json.loads(h.run(t.get_thread(T1, "thread-1")).context)
    assert record["turns"][0] == {
        "at": 1.0,
        "task": "t-add",
        "tool": "memory_add",
        "arguments": {},
        "result": FORGOTTEN,
    }
    assert record["turns"][1]["result"] == "x"
    assert record["session_context"]["memories"] == [{"id": gone, "deleted": True}]
    assert SECRET in h.run(t.get_task(T2, "t-add")).data

    assert (
        h.run(h.store.memories.forgetting.delete_where(T1, Selection((), {"user_id": "alice"})))
        == 2
    )  # listed, and kept: alice's too
    assert "Vambrelle" not in h.run(t.get_task(T1, "t-list")).data
    done = h.run(
        h.store.memories.forgetting.forget_where(
            T1, Selection((), {"user_id": "bob"}), session_keys=["s9"]
        )
    )
    assert done.memories == 1
    assert "Glimmerwick" not in h.run(t.get_task(T1, "t-later")).data
    forgotten_session = json.loads(h.run(t.get_task(T1, "t-session")).data)
    assert forgotten_session["artifacts"][0]["parts"][0]["data"] == {"forgotten": True}
    assert forgotten_session["history"][0]["parts"][0]["data"] == {
        "tool": "session_append",
        "arguments": {},
    }
    at = datetime.now(UTC) + timedelta(seconds=5)
    assert h.run(h.store.memories.forgetting.purge_expired(T1, at, 10)) == 1
    assert "Zephyrnox" not in h.run(t.get_task(T1, "t-expired")).data

    # Only the other tenant's task still refers to a memory: deleting a task takes its
    # references with it, and then no word of the forgotten texts is left in any table.
    assert task_links(h, tmp_path) == [(T2, "t-add")]
    h.run(t.delete_task(T2, "t-add"))
    assert task_links(h, tmp_path) == []
    assert [m for m in MARKERS if m in raw_text(h, tmp_path)] == []


def task_links(h: Harness, tmp_path: Path) -> list[tuple[str, str]]:
    """The tasks (tenant, task id) that refer to something, read from the raw table."""
    sql = (  # a link whose task is gone would read (tenant, None)
        "SELECT DISTINCT l.tenant_id, k.task_id FROM a2a_task_links l LEFT JOIN a2a_tasks k "
        "ON k.tenant_id = l.tenant_id AND k.ref_key = l.task ORDER BY 1, 2"
    )
    if isinstance(h.store, SQLiteStore):
        with sqlite3.connect(tmp_path / "conformance.db") as conn:
            return conn.execute(sql).fetchall()
    with psycopg.connect(PG_URL) as conn:
        return conn.execute(sql).fetchall()


def test_a_task_saved_after_the_delete_is_saved_without_the_text(harness: Harness) -> None:
    """A call that read a memory and finishes after it was deleted: its task (and its
    thread's record) is stored as forgetting would have left it. A task that holds no text
    of the memory (the delete's own answer) is stored as it is."""
    h, t = harness, harness.store.threads
    gone = add(h, SECRET)
    assert h.run(h.store.memories.writes.delete(T1, gone)) is True
    context = {
        "turns": [
            {
                "at": 1.0,
                "task": "t-late",
                "tool": "memory_get",
                "arguments": {"memory_id": gone},
                "result": SECRET,
            }
        ]
    }
    h.run(
        t.create_thread(
            T1,
            NewThread("thread-1", 1.0, json.dumps(context), None, 1),
            _task(
                "t-late",
                {"tool": "memory_get", "arguments": {"memory_id": gone}},
                {"id": gone, "content": SECRET},
            ),
        )
    )
    late = json.loads(h.run(t.get_task(T1, "t-late")).data)
    assert late["artifacts"][0]["parts"][0]["data"] == {"id": gone, "deleted": True}
    assert late["history"][0]["parts"][0]["data"] == {"tool": "memory_get", "arguments": {}}
    record = json.loads(h.run(t.get_thread(T1, "thread-1")).context)
    assert record["turns"][0]["result"] == FORGOTTEN
    answer = {"success": True, "id": gone, "existed": True}
    request = {"tool": "memory_delete", "arguments": {"memory_id": gone}}
    h.run(t.save_task(T1, _task("t-delete", request, answer)))
    kept = json.loads(h.run(t.get_task(T1, "t-delete")).data)
    assert kept["artifacts"][0]["parts"][0]["data"] == answer
    assert kept["history"][0]["parts"][0]["data"] == request


def test_tasks_saved_while_the_memory_is_deleted_keep_no_text(harness: Harness) -> None:
    """Saves of tasks naming a memory racing its delete (PostgreSQL runs them at once): each
    task is either rewritten by the delete or saved rewritten, never left with the text."""
    h, t = harness, harness.store.threads

    async def race(memory_id: str, round_: int) -> None:
        result = {"id": memory_id, "content": SECRET}
        saves = [
            t.save_task(T1, _task(f"t-{round_}-{n}", {"tool": "memory_get"}, result))
            for n in range(12)
        ]
        await asyncio.gather(*saves[:6], h.store.memories.writes.delete(T1, memory_id), *saves[6:])

    for round_ in range(4):
        h.run(race(add(h, SECRET), round_))
        for n in range(12):
            stored = h.run(t.get_task(T1, f"t-{round_}-{n}"))
            assert stored is not None and "Quixotrel" not in stored.data, (round_, n)


def test_forgetting_more_memories_than_a_statement_lists(harness: Harness) -> None:
    """delete_where and forget_where read and delete their memories a run of keys at a
    time (``Dialect.any_of_chunks``, ``CHUNK`` keys a statement): two runs and one more
    are all deleted, each with its history, and the sessions they name are all found."""
    h = harness
    many = 2 * CHUNK + 1
    sessions = [f"s{i}" for i in range(3)]
    memories = [
        NewMemory(
            str(uuid.uuid4()),
            T1,
            scope(MemoryLayer.SESSION, session_id=sessions[i % 3], user_id="many"),
            f"note {i}",
            {},
            None,
        )
        for i in range(many)
    ]
    ids = [m.id for m in h.run(h.store.memories.writes.bulk_add(memories, actor="writer"))]
    kept = add(h, "Another user's memory", sc=scope(user_id="other"))
    everyone = Selection((), {"user_id": "many"})
    assert h.run(h.store.memories.forgetting.count_where(T1, everyone)) == many
    first_layer = Selection((MemoryLayer.SESSION,), {"session_id": "s0", "user_id": "many"})
    in_first = len(range(0, many, 3))
    assert h.run(h.store.memories.forgetting.delete_where(T1, first_layer, actor="dpo")) == in_first
    done = h.run(h.store.memories.forgetting.forget_where(T1, everyone, actor="dpo"))
    assert done.memories == many - in_first
    assert done.sessions == sessions[1:]
    assert h.run(h.store.memories.forgetting.count_where(T1, everyone)) == 0
    for memory_id in (ids[0], ids[CHUNK], ids[-1]):
        events = h.run(h.store.memories.reads.history(T1, memory_id))
        assert [e.operation for e in events] == [HistoryOperation.ADD, HistoryOperation.DELETE]
    assert h.run(h.store.memories.reads.get(T1, kept)) is not None
