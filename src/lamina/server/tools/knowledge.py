"""The knowledge skill's tools: search, read, write and move the knowledge items (ADRs,
policies, patterns, specs) of the tenant's repository."""

from __future__ import annotations

from typing import Any

from lamina.runtime import AsyncLamina
from lamina.server.tools.base import Tool
from lamina.server.tools.knowledge_args import (
    KnowledgeContent,
    KnowledgeCreate,
    KnowledgeGet,
    KnowledgeHistory,
    KnowledgeQuery,
    KnowledgeStatusArgs,
    KnowledgeUpdate,
)
from lamina.shapes import jsonable


def _content(a: KnowledgeContent) -> dict[str, Any]:
    return a.pick(*KnowledgeContent.model_fields)


async def knowledge_query(ms: AsyncLamina, a: KnowledgeQuery, t: str) -> Any:
    filters = a.pick("type", "layer", "layer_id", "status", "tags", "limit")
    hits = await ms.knowledge.search(a.query, mode=a.mode, tenant_id=t, **filters)
    return {"results": jsonable(hits)}


async def knowledge_get(ms: AsyncLamina, a: KnowledgeGet, t: str) -> Any:
    return jsonable(await ms.knowledge.get(a.id, history=a.history, tenant_id=t))


async def knowledge_create(ms: AsyncLamina, a: KnowledgeCreate, t: str) -> Any:
    return jsonable(
        await ms.knowledge.create(
            a.type,
            a.title,
            tenant_id=t,
            **a.pick("layer", "layer_id", "id", "status"),
            **{**_content(a), "severity": a.severity or "info"},
        )
    )


async def knowledge_update(ms: AsyncLamina, a: KnowledgeUpdate, t: str) -> Any:
    return jsonable(await ms.knowledge.update(a.id, title=a.title, tenant_id=t, **_content(a)))


async def knowledge_status(ms: AsyncLamina, a: KnowledgeStatusArgs, t: str) -> Any:
    return jsonable(
        await ms.knowledge.set_status(
            a.id, a.status, tenant_id=t, **a.pick("superseded_by", "author", "message")
        )
    )


async def knowledge_history(ms: AsyncLamina, a: KnowledgeHistory, t: str) -> Any:
    return {"history": jsonable(await ms.knowledge.history(a.id, limit=a.limit, tenant_id=t))}


KNOWLEDGE_TOOLS: tuple[Tool[Any], ...] = (
    Tool(
        "knowledge_query",
        "knowledge",
        "Search ADRs, policies, patterns and specs (accepted by default).",
        KnowledgeQuery,
        knowledge_query,
        read_only=True,
    ),
    Tool(
        "knowledge_get",
        "knowledge",
        "Read a knowledge item, optionally with its history.",
        KnowledgeGet,
        knowledge_get,
        read_only=True,
    ),
    Tool(
        "knowledge_create",
        "knowledge",
        "Add a knowledge item (one git commit).",
        KnowledgeCreate,
        knowledge_create,
        read_only=False,
    ),
    Tool(
        "knowledge_update",
        "knowledge",
        "Change a knowledge item's content (one commit).",
        KnowledgeUpdate,
        knowledge_update,
        read_only=False,
    ),
    Tool(
        "knowledge_status",
        "knowledge",
        "Move a knowledge item along draft → proposed → accepted → deprecated | superseded.",
        KnowledgeStatusArgs,
        knowledge_status,
        read_only=False,
    ),
    Tool(
        "knowledge_history",
        "knowledge",
        "The commits that changed a knowledge item.",
        KnowledgeHistory,
        knowledge_history,
        read_only=True,
    ),
)
