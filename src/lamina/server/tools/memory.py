"""The memory skill's tools: add, search, read, change and delete memories, and their
history. The hierarchy tools, of the same skill, are in hierarchy.py."""

from __future__ import annotations

from typing import Any

from lamina.config import IdentifierFields
from lamina.runtime import AsyncLamina
from lamina.server.tools.base import Tool
from lamina.server.tools.memory_args import (
    MemoryAdd,
    MemoryAddMessages,
    MemoryDeleteAll,
    MemoryId,
    MemoryInvalidate,
    MemoryList,
    MemorySearch,
    MemoryUpdate,
)
from lamina.shapes import jsonable


async def memory_add(ms: AsyncLamina, a: MemoryAdd, t: str) -> Any:
    times = a.pick("timestamp", "valid_from", "valid_until", "ttl")
    options = a.pick("layer", "metadata", "dedup", "infer")
    return jsonable(await ms.memory.add(a.content, tenant_id=t, **options, **times, **a.ids()))


async def memory_add_messages(ms: AsyncLamina, a: MemoryAddMessages, t: str) -> Any:
    added = await ms.memory.add_messages(
        [m.model_dump(exclude_none=True) for m in a.messages],
        tenant_id=t,
        **a.pick("layer", "conversation_id", "metadata", "ttl", "infer"),
        **a.ids(),
    )
    return jsonable(added)


async def memory_search(ms: AsyncLamina, a: MemorySearch, t: str) -> Any:
    hits = await ms.memory.search(
        a.query,
        tenant_id=t,
        **a.pick("layers", "mode", "limit", "threshold", "tags", "filters"),
        **a.window(),
        **a.ids(),
    )
    return {"results": jsonable(hits), "below_threshold": hits.below_threshold}


async def memory_get(ms: AsyncLamina, a: MemoryId, t: str) -> Any:
    # As the library: null when no memory of this tenant has the id (not an error).
    return jsonable(await ms.memory.get(a.memory_id, tenant_id=t))


async def memory_update(ms: AsyncLamina, a: MemoryUpdate, t: str) -> Any:
    return jsonable(
        await ms.memory.update(a.memory_id, content=a.content, metadata=a.metadata, tenant_id=t)
    )


async def memory_delete(ms: AsyncLamina, a: MemoryId, t: str) -> Any:
    return jsonable(await ms.memory.delete(a.memory_id, tenant_id=t))


async def memory_invalidate(ms: AsyncLamina, a: MemoryInvalidate, t: str) -> Any:
    invalidated = await ms.memory.invalidate(a.memory_ids, at=a.at, tenant_id=t)
    return {"invalidated": jsonable(invalidated)}


async def memory_list(ms: AsyncLamina, a: MemoryList, t: str) -> Any:
    return jsonable(
        await ms.memory.list(
            tenant_id=t,
            **a.pick("layers", "tags", "filters", "limit", "cursor"),
            **a.window(),
            **a.ids(),
        )
    )


async def memory_history(ms: AsyncLamina, a: MemoryId, t: str) -> Any:
    events = await ms.memory.history(a.memory_id, tenant_id=t)
    return {"history": [e.model_dump(mode="json") for e in events]}


async def memory_delete_all(ms: AsyncLamina, a: MemoryDeleteAll, t: str) -> Any:
    ids = a.pick(*IdentifierFields.model_fields)
    if a.include_sessions:
        done = await ms.memory.forget(layers=a.layers, tenant_id=t, **ids)
        return {"deleted": done.memories, **done.model_dump(exclude={"memories"})}
    return {"deleted": await ms.memory.delete_all(layers=a.layers, tenant_id=t, **ids)}


MEMORY_TOOLS: tuple[Tool[Any], ...] = (
    Tool(
        "memory_add",
        "memory",
        "Store a memory in a scope layer (secrets are refused in shared layers).",
        MemoryAdd,
        memory_add,
        read_only=False,
    ),
    Tool(
        "memory_add_messages",
        "memory",
        "Store a conversation: each message one memory, verbatim, with its speaker, time "
        "and position (all or none); infer: consolidate the facts it holds.",
        MemoryAddMessages,
        memory_add_messages,
        read_only=False,
    ),
    Tool(
        "memory_search",
        "memory",
        "Search memories across the layers the identifiers reach, most specific first.",
        MemorySearch,
        memory_search,
        read_only=True,
    ),
    Tool(
        "memory_get",
        "memory",
        "Read one memory by id (null when there is none).",
        MemoryId,
        memory_get,
        read_only=True,
    ),
    Tool(
        "memory_update",
        "memory",
        "Change a memory's content or metadata.",
        MemoryUpdate,
        memory_update,
        read_only=False,
    ),
    Tool(
        "memory_delete",
        "memory",
        "Delete a memory (its history keeps who deleted it and when, never its content).",
        MemoryId,
        memory_delete,
        read_only=False,
    ),
    Tool(
        "memory_invalidate",
        "memory",
        "Mark facts as no longer holding (kept; search them with include_invalid).",
        MemoryInvalidate,
        memory_invalidate,
        read_only=False,
    ),
    Tool(
        "memory_list",
        "memory",
        "List memories, newest first, with filters and pages.",
        MemoryList,
        memory_list,
        read_only=True,
    ),
    Tool(
        "memory_history",
        "memory",
        "Every add, update and delete of a memory, oldest first (a deleted memory's events "
        "keep who and when, never its content).",
        MemoryId,
        memory_history,
        read_only=True,
    ),
    Tool(
        "memory_delete_all",
        "memory",
        "Delete every memory whose identifiers include all those given (user_id: that "
        "user's user, agent and session memories); at least one identifier; the count. "
        "include_sessions: their sessions' messages, observations and reflections too.",
        MemoryDeleteAll,
        memory_delete_all,
        read_only=False,
    ),
)
