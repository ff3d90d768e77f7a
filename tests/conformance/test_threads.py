"""The thread-store contract (lamina.threads.ports), the same on every store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina.errors import LaminaError
from lamina.store.sqlite import SQLiteStore
from lamina.threads.packing import pack
from lamina.threads.ports import NewThread, StoredTask
from tests.conformance.conftest import Harness
from tests.conformance.test_forgetting import PG_URL, task_links

TTL = 100.0
#: A byte budget no test reaches.
BIG = 2**40


def test_threads_open_touch_and_expire_when_idle(harness: Harness) -> None:
    h, t = harness, harness.store.threads
    thread, created = h.run(t.open_thread("t1", "a", 1000.0, TTL))
    assert created and not thread.expired
    assert (thread.created_at, thread.updated_at, thread.context, thread.version) == (
        1000.0,
        1000.0,
        "{}",
        0,
    )
    again, created = h.run(t.open_thread("t1", "a", 1050.0, TTL))
    assert not created and again.updated_at == 1050.0 and again.created_at == 1000.0
    assert h.run(t.get_thread("t2", "a")) is None  # another tenant's thread is invisible
    assert h.run(
        t.save_context("t1", "a", context='{"k": 1}', expires_at=2000.0, expected_version=0)
    )
    assert not h.run(
        t.save_context("t1", "a", context='{"k": 2}', expires_at=2000.0, expected_version=0)
    )  # stale version
    stored = h.run(t.get_thread("t1", "a"))
    assert stored is not None
    assert (stored.context, stored.context_expires_at, stored.version) == ('{"k": 1}', 2000.0, 1)

    late, created = h.run(t.open_thread("t1", "a", 1050.0 + TTL, TTL))
    assert late.expired and not created and late.context == "{}"
    expired = h.run(t.get_thread("t1", "a"))
    assert expired is not None and expired.expired and expired.context == "{}"
    assert not h.run(
        t.save_context("t1", "a", context="{}", expires_at=9999.0, expected_version=expired.version)
    )
    still, _ = h.run(t.open_thread("t1", "a", 1060.0 + TTL, TTL))
    assert still.expired


def test_cleanup_and_counts_cross_tenants(harness: Harness) -> None:
    h, t = harness, harness.store.threads
    h.run(t.open_thread("t1", "idle", 0.0, TTL))
    assert h.run(
        t.save_context(
            "t1",
            "idle",
            context="{}",
            expires_at=500.0,
            expected_version=0,
            identifiers='{"user_id": "i"}',
        )
    )
    h.run(t.open_thread("t2", "stale-context", 50.0, TTL))
    assert h.run(
        t.save_context(
            "t2",
            "stale-context",
            context='{"x": 1}',
            expires_at=60.0,
            expected_version=0,
            identifiers='{"user_id": "u"}',
        )
    )
    h.run(t.open_thread("t2", "live", 90.0, TTL))
    h.run(t.save_task("t1", StoredTask("task-1", "idle", 1, 5, "{}")))
    assert h.run(t.count_active(90.0, TTL)) == 3

    counts = h.run(t.cleanup(120.0, TTL, 1000.0))
    assert (counts.threads_expired, counts.states_removed) == (1, 1)
    assert (counts.threads_purged, counts.tasks_purged) == (0, 0)
    assert h.run(t.count_active(120.0, TTL)) == 2
    stale = h.run(t.get_thread("t2", "stale-context"))
    assert stale is not None and stale.context == "{}" and stale.context_expires_at is None
    assert stale.identifiers == '{"user_id": "u"}'  # they live as long as the thread
    idle = h.run(t.get_thread("t1", "idle"))
    assert idle is not None and idle.expired and idle.identifiers == "{}"

    purged = h.run(t.cleanup(120.0 + 1000.0, TTL, 1000.0))
    assert purged.threads_purged >= 1 and purged.tasks_purged == 1
    assert h.run(t.get_thread("t1", "idle")) is None
    assert h.run(t.get_task("t1", "task-1")) is None


def test_tasks_upsert_filter_page_and_delete(harness: Harness) -> None:
    h, t = harness, harness.store.threads
    for i in range(5):
        task = StoredTask(f"task-{i}", "ctx-a" if i % 2 == 0 else "ctx-b", i % 3, 100 + i, "{}")
        h.run(t.save_task("t1", task))
    h.run(t.save_task("t2", StoredTask("task-0", "ctx-a", 0, 1, '{"other": true}')))
    h.run(t.save_task("t1", StoredTask("task-4", "ctx-a", 2, 104, '{"v": 2}')))  # upsert
    got = h.run(t.get_task("t1", "task-4"))
    assert got is not None and got.data == '{"v": 2}'
    assert h.run(t.get_task("t1", "missing")) is None

    def ids(**kwargs: object) -> tuple[list[str], int]:
        args = {"context_id": None, "state": None, "updated_after_ns": None, "before": None}
        args.update(kwargs)
        page, total = h.run(t.list_tasks("t1", limit=2, **args))
        return [task.task_id for task in page], total

    assert ids() == (["task-4", "task-3"], 5)
    assert ids(before=(103, "task-3")) == (["task-2", "task-1"], 5)
    assert ids(context_id="ctx-a") == (["task-4", "task-2"], 3)
    assert ids(state=2, updated_after_ns=103) == (["task-4"], 1)

    h.run(t.delete_task("t1", "task-4"))
    assert h.run(t.get_task("t1", "task-4")) is None
    assert h.run(t.get_task("t2", "task-0")) is not None


def test_a_new_thread_and_its_first_task_are_written_together(harness: Harness) -> None:
    h, t = harness, harness.store.threads
    task = StoredTask("task-1", "fresh", 3, 7, '{"id": "task-1"}')
    thread = NewThread("fresh", 1000.0, '{"turns": []}', 1500.0, 1, '{"user_id": "u"}')
    h.run(t.create_thread("t1", thread, task))
    stored = h.run(t.get_thread("t1", "fresh"))
    assert stored is not None and not stored.expired
    assert (stored.created_at, stored.updated_at, stored.version) == (1000.0, 1000.0, 1)
    assert (stored.context, stored.context_expires_at) == ('{"turns": []}', 1500.0)
    assert stored.identifiers == '{"user_id": "u"}'
    assert h.run(t.get_task("t1", "task-1")) == task
    assert h.run(t.get_thread("t2", "fresh")) is None  # the tenant's own
    # As open_thread would have made it: compare-and-swap and touching work on it.
    assert h.run(t.save_context("t1", "fresh", context="{}", expires_at=2000.0, expected_version=1))
    again, created = h.run(t.open_thread("t1", "fresh", 1050.0, TTL))
    assert not created and again.version == 2
    # Without a context: the row open_thread creates.
    h.run(t.create_thread("t1", NewThread("bare", 10.0), StoredTask("task-2", "bare", 1, 8, "{}")))
    bare = h.run(t.get_thread("t1", "bare"))
    assert bare is not None
    assert (bare.context, bare.context_expires_at, bare.version, bare.identifiers) == (
        "{}",
        None,
        0,
        "{}",
    )
    # The id must be new: nothing is written when it is not.
    with pytest.raises(LaminaError):
        h.run(t.create_thread("t1", thread, StoredTask("task-3", "fresh", 1, 9, "{}")))
    assert h.run(t.get_task("t1", "task-3")) is None


def _task(task_id: str, thread: str, state: int, at: int, memory: str = "") -> StoredTask:
    task: dict[str, Any] = {"id": task_id}
    if memory:
        task["artifacts"] = [{"parts": [{"data": {"id": memory}}]}]
    return StoredTask(task_id, thread, state, at, json.dumps(task))


def test_trim_bounds_tasks_and_threads_by_count(harness: Harness, tmp_path: Path) -> None:
    """Retention bounded by size (server.max_tasks, server.max_threads), across tenants:
    the oldest finished tasks go first, then expired threads, then the least recently
    used; never a task waiting on its client, nor its thread."""
    h, t = harness, harness.store.threads
    completed, failed, input_required = 3, 4, 6
    for i, tenant in enumerate(["t1", "t2", "t1", "t2"]):
        h.run(t.open_thread(tenant, f"th{i}", 100.0 + i, TTL))
    h.run(t.save_task("t1", _task("old", "th0", completed, 1, memory="m1")))
    h.run(t.save_task("t2", _task("waiting", "th1", input_required, 2)))
    h.run(t.save_task("t1", _task("mid", "th2", failed, 3)))
    h.run(t.save_task("t2", _task("new", "th3", completed, 4)))
    # Under the caps: nothing goes.
    assert h.run(t.trim(4, 4, BIG)) == (0, 0)
    # Two tasks past the cap: the two oldest finished ones, not the waiting one.
    assert h.run(t.trim(2, 4, BIG)) == (2, 0)
    assert h.run(t.get_task("t1", "old")) is None and h.run(t.get_task("t1", "mid")) is None
    assert h.run(t.get_task("t2", "waiting")) is not None
    assert h.run(t.get_task("t2", "new")) is not None
    assert task_links(h, tmp_path) == []  # the links of "old" went with it
    # Threads past the cap: the expired one first, then the least recently used, never
    # th1 (its task waits on its client); a thread's tasks go with it.
    h.run(t.open_thread("t1", "th0", 100.0 + 2 * TTL, TTL))  # th0 expires
    assert h.run(t.trim(10, 2, BIG)) == (0, 2)  # th0 (expired), th2 (least recently used)
    assert h.run(t.get_thread("t1", "th0")) is None and h.run(t.get_thread("t1", "th2")) is None
    assert h.run(t.trim(10, 1, BIG)) == (1, 1)  # th3 and its task "new"; th1 stays
    assert h.run(t.get_task("t2", "new")) is None
    assert h.run(t.get_thread("t2", "th1")) is not None
    assert h.run(t.trim(10, 0, BIG)) == (0, 0)  # only th1 is left, and it waits


def test_trim_bounds_tasks_by_bytes(harness: Harness, tmp_path: Path) -> None:
    """Retention bounded by bytes (server.max_task_bytes), across tenants: past the budget,
    the oldest finished tasks go until the rest fit (a task's bytes: its packed JSON); a
    task waiting on its client never goes, even when it alone is over the budget."""
    h, t = harness, harness.store.threads
    completed, input_required = 3, 6
    saved = [
        ("t1", _task("waiting", "th0", input_required, 1, memory="m0")),
        ("t2", _task("old", "th1", completed, 2, memory="m1")),
        ("t1", _task("mid", "th2", completed, 3)),
        ("t2", _task("new", "th3", completed, 4)),
    ]
    for tenant, task in saved:
        h.run(t.save_task(tenant, task))
    size = {task.task_id: len(pack(task.data)) for _, task in saved}
    total = sum(size.values())
    assert h.run(t.trim(100, 100, total)) == (0, 0)  # within the budget
    # One byte over: the oldest finished task goes (not the older, waiting one).
    assert h.run(t.trim(100, 100, total - 1)) == (1, 0)
    assert h.run(t.get_task("t2", "old")) is None
    assert h.run(t.get_task("t1", "waiting")) is not None
    assert task_links(h, tmp_path) == [("t1", "waiting")]  # the links of "old" went with it
    # Enough bytes past the budget to need two more: "mid" and "new" go, oldest first.
    assert h.run(t.trim(100, 100, size["waiting"] + size["new"] - 1)) == (2, 0)
    assert h.run(t.get_task("t1", "mid")) is None and h.run(t.get_task("t2", "new")) is None
    # Alone over the budget, the waiting task stays; the threads are untouched.
    assert h.run(t.trim(100, 100, 1)) == (0, 0)
    assert h.run(t.get_task("t1", "waiting")) is not None


def _thread_rows(h: Harness, tmp_path: Path) -> list[str]:
    """The ids of the rows of a2a_threads, read from the raw table."""
    sql = "SELECT thread_id FROM a2a_threads ORDER BY 1"
    if isinstance(h.store, SQLiteStore):
        with sqlite3.connect(tmp_path / "conformance.db") as conn:
            return [r[0] for r in conn.execute(sql)]
    with psycopg.connect(PG_URL) as conn:
        return [r[0] for r in conn.execute(sql)]


def test_a_one_shot_thread_is_kept_in_its_task_until_continued(
    harness: Harness, tmp_path: Path
) -> None:
    """A thread created with its first task has no row until a call continues it: reads,
    the count of active threads, forgetting, the cleanup and the size cap see it the same."""
    h, t = harness, harness.store.threads
    at = 1000.0
    context = {"identifiers": {"user_id": "u"}, "turns": [{"task": "k1", "arguments": {"q": 1}}]}
    for thread_id, task_id, when in (("one", "k1", at), ("two", "k2", at), ("three", "k3", 990.0)):
        h.run(
            t.create_thread(
                "t1",
                NewThread(thread_id, when, json.dumps(context), at + 50, 1, '{"user_id": "u"}'),
                StoredTask(task_id, thread_id, 3, int(when * 1e9), json.dumps({"id": task_id})),
            )
        )
    assert _thread_rows(h, tmp_path) == []
    kept = h.run(t.get_thread("t1", "one"))
    assert kept is not None and (kept.created_at, kept.updated_at, kept.version) == (at, at, 1)
    assert json.loads(kept.context) == context and kept.identifiers == '{"user_id": "u"}'
    assert h.run(t.get_thread("t2", "one")) is None
    assert h.run(t.count_active(at + 10, TTL)) == 3
    assert h.run(t.count_active(at + TTL + 1, TTL)) == 0
    # Continued: the thread moves to its row, as it was, and is touched.
    opened, created = h.run(t.open_thread("t1", "one", at + 10, TTL))
    assert not created and opened.version == 1 and opened.updated_at == at + 10
    assert json.loads(opened.context) == context and opened.context_expires_at == at + 50
    assert _thread_rows(h, tmp_path) == ["one"]
    # A context written to a thread kept in its task moves it too (compare-and-swap).
    assert not h.run(t.save_context("t1", "two", context="{}", expires_at=9.0, expected_version=0))
    assert h.run(t.save_context("t1", "two", context="{}", expires_at=9.0, expected_version=1))
    assert _thread_rows(h, tmp_path) == ["one", "two"]
    assert h.run(t.count_active(at + 20, TTL)) == 3
    # The size cap counts it among the threads, the least recently used first.
    assert h.run(t.trim(100, 2, BIG)) == (1, 1)
    assert h.run(t.get_thread("t1", "three")) is None and h.run(t.get_task("t1", "k3")) is None
    # The cleanup deletes one idle for thread_ttl, then expired_retention, with its task.
    h.run(
        t.create_thread(
            "t1", NewThread("four", at), StoredTask("k4", "four", 3, int(at * 1e9), "{}")
        )
    )
    assert h.run(t.cleanup(at + TTL + 5, TTL, 10.0)).threads_purged == 0
    purged = h.run(t.cleanup(at + TTL + 11, TTL, 10.0))
    assert (purged.threads_purged, purged.tasks_purged) == (1, 1)
    assert h.run(t.get_task("t1", "k4")) is None and h.run(t.get_thread("t1", "four")) is None
    with pytest.raises(LaminaError):  # its id is taken, kept in a task or in a row
        h.run(t.create_thread("t1", NewThread("one", at), StoredTask("k5", "one", 3, 1, "{}")))
