"""The memory ports: ``MemoryPorts`` holds one repository per small port by concern, each
method in one of them, and ``ContextItemStore`` is ``ItemStore`` (what the knowledge index
names) and the one thing only the context layers do."""

from __future__ import annotations

import dataclasses
import inspect

from lamina.context.ports import ContextItemStore
from lamina.memory.items import ItemStore
from lamina.memory.ports import (
    MemoryEmbeddingStore,
    MemoryForgettingStore,
    MemoryOwnerStore,
    MemoryPorts,
    MemoryReadStore,
    MemoryTransferStore,
    MemoryWriteStore,
)

NARROW = (
    MemoryReadStore,
    MemoryWriteStore,
    MemoryForgettingStore,
    MemoryTransferStore,
    MemoryEmbeddingStore,
    MemoryOwnerStore,
)


def methods(port: type) -> set[str]:
    """The methods ``port`` declares itself (not those of the ports it combines)."""
    return {
        name
        for name, value in vars(port).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def every_method(port: type) -> set[str]:
    return {name for klass in port.__mro__ if klass is not object for name in methods(klass)}


def test_memory_ports_hold_one_repository_per_narrow_port_each_method_in_one() -> None:
    # The annotations are strings (``from __future__ import annotations``).
    fields = [field.type for field in dataclasses.fields(MemoryPorts)]
    assert fields == [port.__name__ for port in NARROW]
    declared = [name for port in NARROW for name in methods(port)]
    assert len(declared) == len(set(declared))
    assert set(declared) == {name for port in NARROW for name in every_method(port)}
    assert len(declared) == 30
    assert all(1 <= len(methods(port)) <= 8 for port in NARROW)


def test_context_item_store_is_the_shared_item_store_and_modify_items() -> None:
    assert methods(ItemStore) == {
        "put_item",
        "get_item",
        "list_items",
        "delete_item",
        "search_items",
    }
    assert methods(ContextItemStore) == {"modify_items"}
    assert every_method(ContextItemStore) == methods(ItemStore) | {"modify_items"}
