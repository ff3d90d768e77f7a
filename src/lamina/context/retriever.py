"""``retrieve``: the query's keywords, then every layer asked for, concurrently.

A query without keywords touches only the layers that do not depend on it (runtime
context, observations, reflections): a follow-up like "why?" still knows the session. A
layer that fails is logged and left empty; the others still return. The searchable layers
share one query vector.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from lamina.checks import check_int, check_query, invalid
from lamina.context.keywords import extract_keywords
from lamina.context.models import (
    DEFAULT_LAYERS,
    ContextItem,
    ContextLayer,
    RetrievalResult,
)
from lamina.context.providers import RuntimeContextProvider, ToolRegistryProvider
from lamina.context.searchable_layers import (
    KnowledgeStore,
    LearningStore,
    ReferenceStore,
    SkillStore,
)
from lamina.embeddings.base import Vector
from lamina.errors import LaminaError
from lamina.memory.items import ContextRecord
from lamina.memory.models import SearchMode

log = logging.getLogger(__name__)

#: The layers whose items do not depend on the query.
QUERY_FREE_LAYERS = frozenset(
    {ContextLayer.RUNTIME_CONTEXT, ContextLayer.OBSERVATIONS, ContextLayer.REFLECTIONS}
)

#: How long knowledge use counts are gathered before one write.
USE_FLUSH_SECONDS = 1.0


class ConversationMemorySource(Protocol):
    """Observations and reflections of a session (observational memory provides them)."""

    async def recent_observations(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]: ...

    async def recent_reflections(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]: ...


def parse_layers(layers: Sequence[ContextLayer | str] | str | None) -> tuple[ContextLayer, ...]:
    if layers is None:
        return DEFAULT_LAYERS
    if isinstance(layers, str):
        layers = [part for part in layers.split(",") if part.strip()]
    parsed = tuple(dict.fromkeys(ContextLayer.parse(layer) for layer in layers))
    return parsed


def _knowledge_item(record: ContextRecord, score: float) -> ContextItem:
    return ContextItem(
        layer=ContextLayer.USER_KNOWLEDGE,
        key=record.key,
        content=record.content,
        score=score,
        source=str(record.data.get("source", "")),
        category=record.category or "",
    )


def _learning_item(record: ContextRecord, score: float) -> ContextItem:
    data = record.data
    return ContextItem(
        layer=ContextLayer.AGENT_LEARNINGS,
        key=str(data.get("trigger", record.key)),
        content=record.content,
        score=score,
        source="agent_learning",
        category=record.category or "",
        fields={
            "trigger": data.get("trigger", record.key),
            "fix": data.get("fix", ""),
            "diagnosis": data.get("diagnosis", ""),
            "confidence": data.get("confidence", 0.5),
        },
    )


def _skill_item(record: ContextRecord, score: float) -> ContextItem:
    description = str(record.data.get("description", ""))
    return ContextItem(
        layer=ContextLayer.SKILL_PATTERNS,
        key=record.key,
        content=description,
        score=score,
        source="skill_pattern",
        category=record.category or "",
        fields={"name": record.key, "description": description},
    )


def _reference_item(record: ContextRecord, score: float) -> ContextItem:
    data = record.data
    return ContextItem(
        layer=ContextLayer.EXTERNAL_KNOWLEDGE,
        key=record.key,
        content=str(data.get("summary", "")),
        score=score,
        source=str(data.get("location", "")),
        category=record.category or "",
        fields={
            "name": record.key,
            "location": data.get("location", ""),
            "summary": data.get("summary", ""),
        },
    )


class ContextRetriever:
    def __init__(
        self,
        *,
        knowledge: KnowledgeStore,
        learnings: LearningStore,
        skills: SkillStore,
        references: ReferenceStore,
        query_vector: Callable[[str, str], Awaitable[Vector]],
        search_mode: SearchMode,
        min_score: float,
        max_query_length: int,
    ) -> None:
        self._stores: dict[ContextLayer, Any] = {
            ContextLayer.USER_KNOWLEDGE: (knowledge, _knowledge_item),
            ContextLayer.AGENT_LEARNINGS: (learnings, _learning_item),
            ContextLayer.SKILL_PATTERNS: (skills, _skill_item),
            ContextLayer.EXTERNAL_KNOWLEDGE: (references, _reference_item),
        }
        self._knowledge = knowledge
        self._query_vector = query_vector
        self._mode = search_mode
        self._min_score = min_score
        self._max_query_length = max_query_length
        self.tools: ToolRegistryProvider | None = None
        self.runtime: RuntimeContextProvider | None = None
        self.conversation: ConversationMemorySource | None = None
        self._pending_uses: dict[str, Counter[str]] = {}
        self._flusher: asyncio.Task[None] | None = None

    async def retrieve(
        self,
        query: str,
        *,
        layers: Sequence[ContextLayer | str] | str | None,
        max_per_layer: int,
        session_key: str | None,
        tenant: str,
        runtime: RuntimeContextProvider | None = None,
    ) -> RetrievalResult:
        """``runtime`` (when given) is asked for the runtime context instead of the
        retriever's own provider."""
        if not isinstance(query, str):
            raise invalid("query must be a string")
        check_int("max_per_layer", max_per_layer, minimum=1, maximum=100)
        wanted = parse_layers(layers)
        keywords = extract_keywords(query) if query.strip() else []
        if keywords:
            check_query(query, self._max_query_length)
        if not keywords:
            wanted = tuple(layer for layer in wanted if layer in QUERY_FREE_LAYERS)
        if not wanted:
            return RetrievalResult(query=query, keywords=keywords)
        searchable = [layer for layer in wanted if layer in self._stores]
        vector: Vector | None = None
        mode = self._mode
        if searchable and mode is not SearchMode.KEYWORD:
            try:
                vector = await self._query_vector(tenant, query)
            except LaminaError as exc:
                log.warning("embedding the context query failed (%s); keyword search only", exc)
                mode = SearchMode.KEYWORD
        tasks = [
            self._layer(layer, query, keywords, vector, mode, max_per_layer, session_key, tenant)
            if layer is not ContextLayer.RUNTIME_CONTEXT
            else self._runtime_items(self.runtime if runtime is None else runtime)
            for layer in wanted
        ]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        items: dict[ContextLayer, list[ContextItem]] = {}
        for layer, result in zip(wanted, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                log.warning("context layer %s failed: %s", layer.value, result)
                items[layer] = []
            else:
                items[layer] = result
        used = [i.key for i in items.get(ContextLayer.USER_KNOWLEDGE, [])]
        if used:
            self._count_use(used, tenant)
        return RetrievalResult(query=query, keywords=keywords, items=items)

    def _count_use(self, keys: list[str], tenant: str) -> None:
        """Count uses of knowledge in the background: retrieval never waits for a write.
        Uses are gathered for up to USE_FLUSH_SECONDS and written in one transaction."""
        pending = self._pending_uses.setdefault(tenant, Counter())
        pending.update(keys)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(USE_FLUSH_SECONDS)
        await self._write_uses()

    async def _write_uses(self) -> None:
        while self._pending_uses:
            tenant, counts = self._pending_uses.popitem()
            try:
                await self._knowledge.record_use(counts, tenant_id=tenant)
            except LaminaError as exc:
                log.warning("counting knowledge use failed: %s", exc)

    async def drain(self) -> None:
        """Write the uses gathered so far now (at shutdown, or to read exact counts)."""
        flusher = self._flusher
        if flusher is not None and not flusher.done():
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
        await self._write_uses()

    async def _layer(
        self,
        layer: ContextLayer,
        query: str,
        keywords: list[str],
        vector: Vector | None,
        mode: SearchMode,
        limit: int,
        session_key: str | None,
        tenant: str,
    ) -> list[ContextItem]:
        if layer in self._stores:
            store, to_item = self._stores[layer]
            hits = await store.search_records(
                " ".join(keywords) if mode is SearchMode.KEYWORD else query,
                limit=limit * 2 if layer is ContextLayer.USER_KNOWLEDGE else limit,
                mode=mode,
                min_score=self._min_score if mode is not SearchMode.KEYWORD else None,
                tenant_id=tenant,
                vector=vector,
            )
            found: list[ContextItem] = [to_item(r, s) for r, s in hits]
            if layer is ContextLayer.USER_KNOWLEDGE:
                # A knowledge item's relevance (0..1, default 1) weighs its score.
                weight = {r.key: float(r.data.get("relevance_score", 1.0)) for r, _ in hits}
                found = sorted(
                    (i.model_copy(update={"score": i.score * weight[i.key]}) for i in found),
                    key=lambda i: -i.score,
                )[:limit]
            return found
        if layer is ContextLayer.TOOL_REGISTRY:
            return self._tools(keywords, limit)
        if self.conversation is None or not session_key:
            return []
        if layer is ContextLayer.OBSERVATIONS:
            texts = await self.conversation.recent_observations(
                session_key, limit, tenant_id=tenant
            )
        else:
            texts = await self.conversation.recent_reflections(session_key, limit, tenant_id=tenant)
        return [
            ContextItem(layer=layer, key=f"{layer.value}-{n}", content=t, score=1.0)
            for n, t in enumerate(texts)
        ]

    async def _runtime_items(self, runtime: RuntimeContextProvider | None) -> list[ContextItem]:
        if runtime is None:
            return []
        state = runtime.get_runtime_context()
        return [
            ContextItem(
                layer=ContextLayer.RUNTIME_CONTEXT,
                key="session-state",
                content=state.describe(),
                score=1.0,
                source="runtime",
            )
        ]

    def _tools(self, keywords: list[str], limit: int) -> list[ContextItem]:
        """Tools matching any keyword (substring of name or description), most matches
        first."""
        if self.tools is None:
            return []
        hits: dict[str, tuple[int, Any]] = {}
        for word in keywords:
            for tool in self.tools.search_tools(word, 1000):
                count, _ = hits.get(tool.name, (0, tool))
                hits[tool.name] = (count + 1, tool)
        ranked = sorted(hits.values(), key=lambda h: -h[0])[:limit]
        return [
            ContextItem(
                layer=ContextLayer.TOOL_REGISTRY,
                key=tool.name,
                content=tool.description,
                score=count / len(keywords),
                source="tool_registry",
                fields={"name": tool.name, "description": tool.description},
            )
            for count, tool in ranked
        ]
