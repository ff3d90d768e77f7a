"""ms.memory as a whole (memory/service.py): the quickstart, tenants, the async API and the
blocking facade."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lamina import ErrorCode, Lamina, LaminaError, MemoryLayer
from tests.conftest import fast_settings


def test_quickstart(ms: Lamina) -> None:
    m = ms.memory.add(
        "Prefers dark mode in every editor",
        layer="user",
        user_id="alice",
        metadata={"tags": ["ui"]},
    )
    assert m.id and m.tenant_id == "default" and m.layer is MemoryLayer.USER
    assert m.metadata == {"tags": ["ui"]} and m.tags == ["ui"] and m.embedding_generated
    hits = ms.memory.search("editor theme", user_id="alice", threshold=0.3)
    assert hits[0].memory.content == "Prefers dark mode in every editor"
    assert hits[0].memory.layer is MemoryLayer.USER and 0.3 <= hits[0].score <= 1.0


def test_tenants_never_see_each_other(ms: Lamina) -> None:
    a = ms.memory.add("tenant A secret plan", layer="user", user_id="u", tenant_id="A")
    assert ms.memory.get(a.id, tenant_id="B") is None
    assert ms.memory.search("secret plan", user_id="u", tenant_id="B", threshold=0.0) == []
    assert ms.memory.search("secret", user_id="u", tenant_id="B", mode="keyword") == []
    assert ms.memory.list(user_id="u", tenant_id="B").total_count == 0
    with pytest.raises(LaminaError) as err:
        ms.memory.update(a.id, content="hijacked", tenant_id="B")
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND
    assert ms.memory.delete(a.id, tenant_id="B").existed is False
    with pytest.raises(LaminaError):
        ms.memory.history(a.id, tenant_id="B")
    assert ms.memory.get(a.id, tenant_id="A") == a
    assert ms.memory.get(a.id) is None  # the default tenant is "default"


def test_async_api_mirrors_sync(data_dir: Path) -> None:
    import asyncio

    from lamina import AsyncLamina

    async def main() -> None:
        async with AsyncLamina(fast_settings(data_dir)) as ams:
            m = await ams.memory.add("async memory", layer="user", user_id="u")
            hits = await ams.memory.search("async memory", user_id="u")
            assert [h.memory.id for h in hits] == [m.id]
            assert (await ams.health())["healthy"]

    asyncio.run(main())
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.memory.list(user_id="u").total_count == 1


def test_sync_facade_is_thread_safe(ms: Lamina) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                ms.memory.add(f"thread {n} item {i}", layer="user", user_id="u")
                ms.memory.search(f"thread {n}", user_id="u", threshold=0.0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert ms.memory.list(user_id="u").total_count == 40


def test_a_wrong_argument_is_the_callers_type_error_never_an_operation(ms: Lamina) -> None:
    """Each memory call binds its arguments before it runs as an observed operation
    (lamina.memory.base.observed): a wrong one is the TypeError Python gives, never an
    INTERNAL_ERROR, and is neither counted nor timed as the operation; an unknown identifier
    keyword is refused by name, as any unexpected keyword argument is."""
    entry = ms.memory.add("likes tea", layer="user", user_id="u1")
    with pytest.raises(TypeError, match="unexpected keyword argument 'user_id'"):
        ms.memory.get(entry.id, user_id="u1")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'memory_id'"):
        ms.memory.history()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^count_all\(\) got an unexpected keyword argument 'usr'"):
        ms.memory.count_all(usr="u1")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'scope_ids'"):
        ms.memory.delete_all(scope_ids={"user_id": "u1"})  # type: ignore[call-arg]
    text = ms.metrics_text()
    for operation in ("get", "history", "count_all", "delete_all"):
        assert f'memory_operations_total{{operation="{operation}"}}' not in text
    assert "memory_operations_errors_total{" not in text
    assert ms.memory.count_all(user_id="u1") == 1
    assert ms.memory.get(entry.id) == entry
    text = ms.metrics_text()
    assert 'memory_operations_total{operation="get"} 1.0' in text
    assert 'memory_operations_latency_seconds_count{operation="count_all"} 1.0' in text
