"""The threads service the doors read and write through (``AsyncLamina.thread_service``):
the A2A tasks of a tenant and its threads, checked, started and retried like the memory
service's calls, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina.errors import ErrorCode, LaminaError
from lamina.runtime import AsyncLamina
from lamina.threads.ports import NewThread, StoredTask
from tests.conftest import fast_settings
from tests.pg import require_postgres, reset_database


@pytest.fixture(params=["sqlite", "postgresql"])
def overrides(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if request.param == "sqlite":
        yield {}
        return
    url = require_postgres()
    reset_database(url)
    yield {"database_url": url}


def task(task_id: str, context_id: str, updated_ns: int, state: int = 3) -> StoredTask:
    data = f'{{"id":"{task_id}","contextId":"{context_id}"}}'
    return StoredTask(task_id, context_id, state, updated_ns, data)


def test_tasks_are_the_tenants_own(data_dir: Path, overrides: dict[str, Any]) -> None:
    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir, **overrides)) as ms:
            tasks = ms.thread_service().tasks
            await tasks.save("acme", task("t1", "c1", 1_000))
            await tasks.save("acme", task("t2", "c2", 2_000, state=4))
            await tasks.save("other", task("t3", "c1", 3_000))

            found, total = await tasks.list("acme", limit=10)
            assert [t.task_id for t in found] == ["t2", "t1"] and total == 2
            failed, total = await tasks.list("acme", limit=10, state=4)
            assert [t.task_id for t in failed] == ["t2"] and total == 1
            older, _ = await tasks.list("acme", limit=10, before=(2_000, "t2"))
            assert [t.task_id for t in older] == ["t1"]
            assert await tasks.get("other", "t1") is None
            got = await tasks.get("acme", "t1")
            assert got is not None and got.context_id == "c1"

            await tasks.delete("acme", "t1")
            assert await tasks.get("acme", "t1") is None
            assert (await tasks.get("other", "t3")) is not None

    asyncio.run(scenario())


def test_a_task_saved_with_its_new_thread(data_dir: Path, overrides: dict[str, Any]) -> None:
    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir, **overrides)) as ms:
            threads = ms.thread_service()
            await threads.tasks.save_with_thread(
                "acme", task("t1", "fresh", 5), NewThread("fresh", time.time())
            )
            thread = await threads.get("acme", "fresh")
            assert thread is not None and thread.thread_id == "fresh"
            assert await threads.get("other", "fresh") is None
            assert (await threads.tasks.get("acme", "t1")) is not None

    asyncio.run(scenario())


@pytest.mark.parametrize(("tenant", "code"), [("", ErrorCode.MISSING_IDENTIFIER), (7, None)])
def test_a_bad_tenant_is_refused_and_nothing_changes(
    data_dir: Path, overrides: dict[str, Any], tenant: Any, code: ErrorCode | None
) -> None:
    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir, **overrides)) as ms:
            threads = ms.thread_service()
            await threads.tasks.save("acme", task("t1", "c1", 1))
            calls = [
                threads.tasks.save(tenant, task("t2", "c1", 2)),
                threads.tasks.save_with_thread(tenant, task("t3", "n", 3), NewThread("n", 1.0)),
                threads.tasks.get(tenant, "t1"),
                threads.tasks.list(tenant, limit=5),
                threads.tasks.delete(tenant, "t1"),
                threads.open(tenant, "c1"),
                threads.get(tenant, "c1"),
                threads.update(tenant, "c1", lambda context: context.update(x=1)),
            ]
            for call in calls:
                with pytest.raises(LaminaError) as caught:
                    await call
                expected = code or ErrorCode.INVALID_ARGUMENT
                assert caught.value.code is expected
                assert "tenant_id" in caught.value.message
            found, total = await threads.tasks.list("acme", limit=5)
            assert [t.task_id for t in found] == ["t1"] and total == 1
            assert await threads.get("acme", "n") is None

    asyncio.run(scenario())


def test_the_service_starts_the_runtime(data_dir: Path, overrides: dict[str, Any]) -> None:
    """A call before ``start`` opens and migrates the store first, as memory calls do."""

    async def scenario() -> None:
        ms = AsyncLamina(fast_settings(data_dir, **overrides))
        try:
            assert ms.schema_version == 0
            threads = ms.thread_service()
            assert await threads.tasks.list("acme", limit=5) == ([], 0)
            assert await threads.active() == 0
            status = await ms.check_database()
            assert status.healthy
            assert ms.schema_version > 0
            assert status.details["schema_version"] == ms.schema_version
        finally:
            await ms.close()

    asyncio.run(scenario())


def test_calls_are_counted(data_dir: Path, overrides: dict[str, Any]) -> None:
    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir, **overrides)) as ms:
            threads = ms.thread_service()
            await threads.tasks.save("acme", task("t1", "c1", 1))
            await threads.tasks.list("acme", limit=5)
            await threads.tasks.list("acme", limit=5)
            await threads.open("acme", "c1")
            with pytest.raises(LaminaError):
                await threads.tasks.save_with_thread(
                    "acme", task("t2", "c1", 2), NewThread("c1", 1.0)
                )
            text = ms.metrics_text()
        assert 'a2a_thread_operations_total{operation="list_tasks"} 2.0' in text
        assert 'a2a_thread_operations_total{operation="save_task"} 1.0' in text
        assert 'a2a_thread_operations_total{operation="open_thread"} 1.0' in text
        assert 'a2a_thread_operations_latency_seconds_count{operation="list_tasks"} 2.0' in text
        assert "a2a_thread_operations_errors_total{code=" in text
        failed = [
            line
            for line in text.splitlines()
            if line.startswith("a2a_thread_operations_errors_total{")
        ]
        assert len(failed) == 1 and 'operation="create_thread"' in failed[0]

    asyncio.run(scenario())


def test_a_busy_database_is_retried(data_dir: Path) -> None:
    """A write refused while another process holds the SQLite file's write lock longer than
    the busy timeout is retried, and lands once the lock is gone."""
    settings = fast_settings(
        data_dir,
        sqlite_busy_timeout=0.05,
        retry={"max_retries": 8, "initial_delay": 0.05, "max_delay": 0.5},
    )

    async def scenario() -> None:
        async with AsyncLamina(settings) as ms:
            threads = ms.thread_service()
            other = sqlite3.connect(settings.sqlite_path(), check_same_thread=False)
            other.execute("BEGIN IMMEDIATE")
            release = threading.Timer(0.3, other.rollback)
            release.start()
            try:
                started = time.monotonic()
                await threads.tasks.save("acme", task("t1", "c1", 1))
                assert time.monotonic() - started >= 0.25  # it waited for the lock
            finally:
                release.join()
                other.close()
            assert (await threads.tasks.get("acme", "t1")) is not None
            text = ms.metrics_text()
        assert 'a2a_thread_operations_total{operation="save_task"} 1.0' in text
        assert "a2a_thread_operations_errors_total{" not in text

    asyncio.run(scenario())
