"""The knowledge repository's search index: one context-item row per item (keyword and
semantic search, like every other layer) and one state row recording the commit the index
reflects. Git stays the source of truth; the index is rebuilt from it whenever it is behind."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from lamina.embeddings.base import Vector
from lamina.knowledge.models import KnowledgeItem
from lamina.memory.items import ContextRecord, ItemAccess, ItemKind, ItemStore, NewContextRecord
from lamina.memory.models import SearchMode

STATE_KEY = "head"
_EMBED_BODY_CHARS = 400


def filter_tag(
    type_: str | None, status: str | None, layer: str | None, scope: str | None
) -> str | None:
    """The one index tag standing for this combination of filters (None: no filter)."""
    parts = []
    if type_:
        parts.append(f"type={type_}")
    if status:
        parts.append(f"status={status}")
    if scope:
        parts.append(f"scope={scope}")
    elif layer:
        parts.append(f"layer={layer}")
    return "f:" + "|".join(parts) if parts else None


def index_tags(item: KnowledgeItem) -> list[str]:
    """Every filter combination the item satisfies, plus its own tags (``tag:<t>``)."""
    tags = []
    for t, s, where in itertools.product(
        (None, item.type.value),
        (None, item.status.value),
        (None, ("layer", item.layer.value), ("scope", item.scope)),
    ):
        layer = where[1] if where and where[0] == "layer" else None
        scope = where[1] if where and where[0] == "scope" else None
        tag = filter_tag(t, s, layer, scope)
        if tag is not None:
            tags.append(tag)
    return tags + [f"tag:{t}" for t in item.tags]


def index_text(item: KnowledgeItem) -> str:
    parts = [item.title, item.summary, *item.constraints, item.body]
    return "\n".join(p for p in parts if p)


def embed_text(item: KnowledgeItem) -> str:
    """What the item's vector stands for: its title and summary (the start of the body when
    there is no summary). The whole text is in the keyword index."""
    extra = item.summary or item.body[:_EMBED_BODY_CHARS]
    return "\n".join(p for p in (item.title, extra) if p)


def item_of(record: ContextRecord) -> KnowledgeItem:
    return KnowledgeItem.model_validate(record.data["item"])


class KnowledgeIndex:
    def __init__(self, items: ItemAccess[ItemStore]) -> None:
        """``items``: the store of the index rows and what searching it takes."""
        self._items = items

    async def state(self, tenant: str) -> dict[str, Any] | None:
        records = await self._items.retry.run(
            "knowledge index state",
            lambda: self._items.store.get_item(tenant, ItemKind.DOCUMENT_INDEX, STATE_KEY),
        )
        return records[0].data if records else None

    async def set_state(self, tenant: str, data: dict[str, Any]) -> None:
        """Record the state: ``commit`` (what the index reflects), ``invalid`` (files it
        skipped), ``policies`` (the last commit that changed a policy), ``counters`` (the
        last generated id number per type)."""
        record = NewContextRecord(
            tenant, ItemKind.DOCUMENT_INDEX, STATE_KEY, None, "", data, [], None
        )
        await self._items.retry.run(
            "knowledge index state", lambda: self._items.store.put_item(record, versioned=False)
        )

    async def put(self, tenant: str, items: Sequence[KnowledgeItem], batch: int = 256) -> None:
        for lo in range(0, len(items), batch):
            chunk = items[lo : lo + batch]
            texts = [embed_text(i) for i in chunk]
            vectors = await self._embed_batch(tenant, texts)
            for item, vector in zip(chunk, vectors, strict=True):
                record = NewContextRecord(
                    tenant,
                    ItemKind.DOCUMENT,
                    item.id,
                    item.type.value,
                    index_text(item),
                    {"item": item.model_dump(mode="json")},
                    index_tags(item),
                    vector,
                )
                await self._put_record(record)

    async def _embed_batch(self, tenant: str, texts: list[str]) -> Vector:
        return await self._items.retry.run(
            "embed knowledge", lambda: self._items.embed(tenant, texts)
        )

    async def _put_record(self, record: NewContextRecord) -> None:
        await self._items.retry.run(
            "index knowledge", lambda: self._items.store.put_item(record, versioned=False)
        )

    async def _page(
        self, tenant: str, tags: list[str], limit: int, cursor: str | None
    ) -> tuple[list[ContextRecord], str | None, int]:
        return await self._items.retry.run(
            "knowledge list",
            lambda: self._items.store.list_items(
                tenant, ItemKind.DOCUMENT, category=None, tags=tags, limit=limit, cursor=cursor
            ),
        )

    async def remove(self, tenant: str, item_id: str) -> None:
        await self._items.retry.run(
            "unindex knowledge",
            lambda: self._items.store.delete_item(tenant, ItemKind.DOCUMENT, item_id),
        )

    async def lookup(self, tenant: str, item_id: str) -> KnowledgeItem | None:
        records = await self._items.retry.run(
            "knowledge lookup",
            lambda: self._items.store.get_item(tenant, ItemKind.DOCUMENT, item_id),
        )
        if not records or records[0].key != item_id:  # get_item also matches row ids
            return None
        return item_of(records[0])

    async def page(
        self, tenant: str, tag: str | None, limit: int, cursor: str | None
    ) -> tuple[list[KnowledgeItem], str | None, int]:
        records, next_cursor, total = await self._page(tenant, [tag] if tag else [], limit, cursor)
        return [item_of(r) for r in records], next_cursor, total

    async def all_ids(self, tenant: str) -> set[str]:
        ids: set[str] = set()
        cursor = None
        while True:
            records, cursor, _ = await self._page(tenant, [], 1000, cursor)
            ids.update(r.key for r in records)
            if cursor is None:
                return ids

    async def search(
        self,
        tenant: str,
        text: str,
        *,
        tag: str | None,
        mode: SearchMode,
        limit: int,
    ) -> list[tuple[KnowledgeItem, float]]:
        hits = await self._items.search(
            "knowledge search",
            tenant,
            ItemKind.DOCUMENT,
            text,
            mode=mode,
            limit=limit,
            tags=(tag,) if tag else (),
        )
        return [(item_of(r), score) for r, score in hits]
