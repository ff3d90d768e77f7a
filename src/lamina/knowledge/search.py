"""Finding knowledge items through the index: ``list`` (filtered pages, oldest first),
``search`` (keyword, semantic or hybrid, best first) and ``items_at`` (what governance merges)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Unpack

from lamina.checks import check_choice, check_cursor, check_fraction, check_limit, check_query
from lamina.knowledge.fields import ItemFilters, item_filters
from lamina.knowledge.index import filter_tag
from lamina.knowledge.models import (
    KnowledgeHit,
    KnowledgeItem,
    KnowledgePage,
    KnowledgeStatus,
    KnowledgeType,
)
from lamina.knowledge.repository import Repository
from lamina.memory.models import SearchMode


class ItemSearch:
    """``list``, ``search`` and ``items_at``."""

    def __init__(self, repository: Repository) -> None:
        self._repository = repository

    async def list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
        **filters: Unpack[ItemFilters],
    ) -> KnowledgePage:
        """Items, oldest first, filtered by type, layer (and layer_id), status (default
        accepted; ``"any"`` or None for all) and tags (any of them)."""
        tag, wanted = item_filters("list", filters)
        tenant = self._repository.tenant(tenant_id)
        size = check_limit(limit, default=50, maximum=self._repository.max_limit)
        cursor = check_cursor(cursor)
        await self._repository.ensure_synced(tenant)
        if not wanted:
            items, next_cursor, total = await self._repository.index.page(tenant, tag, size, cursor)
            return KnowledgePage(items=items, next_cursor=next_cursor, total_count=total)
        # Tags filter after the index filter: read pages until the page is full.
        out: builtins.list[KnowledgeItem] = []
        while len(out) < size:
            more = size - len(out)
            items, cursor, _ = await self._repository.index.page(tenant, tag, more, cursor)
            out.extend(i for i in items if set(i.tags) & set(wanted))
            if cursor is None:
                break
        total = await self._count(tenant, tag, wanted)
        return KnowledgePage(items=out, next_cursor=cursor, total_count=total)

    async def _count(self, tenant: str, tag: str | None, wanted: builtins.list[str]) -> int:
        total, cursor = 0, None
        while True:
            items, cursor, _ = await self._repository.index.page(tenant, tag, 1000, cursor)
            total += sum(1 for i in items if set(i.tags) & set(wanted))
            if cursor is None:
                return total

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        mode: str | SearchMode | None = None,
        min_score: float | None = None,
        tenant_id: str | None = None,
        **filters: Unpack[ItemFilters],
    ) -> builtins.list[KnowledgeHit]:
        """Best matches first (keyword, semantic or hybrid, as memory search), with the same
        filters as ``list``."""
        tag, wanted = item_filters("search", filters)
        tenant = self._repository.tenant(tenant_id)
        text = check_query(query, self._repository.max_query)
        size = check_limit(limit, default=10, maximum=self._repository.max_limit)
        default = self._repository.search_mode
        how = default if mode is None else check_choice("mode", mode, SearchMode)
        floor = None if min_score is None else check_fraction("min_score", min_score)
        await self._repository.ensure_synced(tenant)
        pool = min(self._repository.max_limit, size * 5) if wanted else size
        hits = await self._repository.index.search(tenant, text, tag=tag, mode=how, limit=pool)
        out = [
            KnowledgeHit(item=item, score=score)
            for item, score in hits
            if (not wanted or set(item.tags) & set(wanted)) and (floor is None or score >= floor)
        ]
        return out[:size]

    async def items_at(
        self, tenant: str, scopes: Sequence[str], kind: KnowledgeType, *, sync: bool = True
    ) -> builtins.list[KnowledgeItem]:
        """Every accepted item of ``kind`` in the given scopes (``company``, ``team/<id>``…)."""
        if sync:
            await self._repository.ensure_synced(tenant)
        out: builtins.list[KnowledgeItem] = []
        for scope in scopes:
            tag = filter_tag(kind.value, KnowledgeStatus.ACCEPTED.value, None, scope)
            cursor = None
            while True:
                items, cursor, _ = await self._repository.index.page(tenant, tag, 1000, cursor)
                out.extend(items)
                if cursor is None:
                    break
        return out
