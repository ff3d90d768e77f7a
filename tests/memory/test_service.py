"""ms.memory as a whole (memory/service.py): the quickstart, tenants, the async API and the
blocking facade."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from pathlib import Path
from typing import Protocol

import pytest
from pydantic import BaseModel

import lamina.memory
from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError, MemoryLayer
from lamina.memory.reembed import content_text
from lamina.memory.service import MemoryService
from tests.conftest import fast_settings
from tests.delegates import delegated_calls


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


def test_each_public_call_is_the_method_of_one_part(data_dir: Path) -> None:
    """ms.memory holds its parts (memory/service.py): each public call is one part's own
    method, bound to that part (observed there, once), and on the class a function that
    is a coroutine function when the part's method is one (SyncMemory bridges those)."""
    service = AsyncLamina(fast_settings(data_dir)).memory
    delegated = delegated_calls(service, documented=False)
    hooks = {"embedding_buffer", "write_guard", "chat_model", "counter", "item_text"}
    assert {n for n in dir(MemoryService) if not n.startswith("_")} == {*delegated, *hooks}
    assert len(delegated) == 31


def test_what_the_runtime_sets_reaches_the_parts(data_dir: Path) -> None:
    """The write guard, the token counter and the item text the runtime sets on ms.memory
    are those its parts use (the chat model: tests/memory/test_consolidation.py)."""
    ams = AsyncLamina(fast_settings(data_dir))
    service = ams.memory
    assert service.counter is ams.counter and service.consolidation.counter is ams.counter
    assert service.item_text is service.reembedding.item_text
    assert service.item_text is not content_text
    assert service.write_guard is not None
    service.write_guard = None
    assert service.write_guard is None


def lamina_classes(klass: type) -> list[type]:
    """The classes of lamina ``klass`` inherits from, ports (Protocols) and pydantic models
    aside."""
    return [
        base
        for base in klass.__mro__[1:]
        if base.__module__.startswith("lamina.")
        and Protocol not in base.__mro__
        and not issubclass(base, BaseModel)
    ]


def test_no_memory_class_inherits_from_more_than_three_of_laminas() -> None:
    """Composition, not stacks (issue 34): no class of lamina.memory inherits from more than
    three of lamina's own classes."""
    stacked = []
    for info in pkgutil.walk_packages(lamina.memory.__path__, "lamina.memory."):
        module = importlib.import_module(info.name)
        for klass in vars(module).values():
            mine = isinstance(klass, type) and klass.__module__ == module.__name__
            if mine and len(lamina_classes(klass)) > 3:
                stacked.append(klass.__qualname__)
    assert stacked == []
    assert lamina_classes(MemoryService) == []
