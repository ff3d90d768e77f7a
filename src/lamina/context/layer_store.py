"""The generic store of a searchable context layer: save, search, list, get and delete over
the store's context items, tenant-scoped, with keyword and semantic search like memories.
A layer (``context/searchable_layers.py``) names the model it returns and where that model's
fields live in a record."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

from pydantic import BaseModel

from lamina.checks import (
    check_choice,
    check_content,
    check_cursor,
    check_fraction,
    check_key,
    check_limit,
    check_query,
    check_strings,
    check_tenant,
)
from lamina.context.ports import ContextItemStore
from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.items import ContextRecord, ItemAccess, ItemKind, NewContextRecord
from lamina.memory.models import SearchMode
from lamina.shapes import Frozen

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E")

MAX_TAGS = 64


class ItemHit(Frozen, Generic[M]):
    item: M
    score: float


class ItemPage(Frozen, Generic[M]):
    items: list[M]
    next_cursor: str | None
    total_count: int


@dataclass
class ItemContext:
    """What every layer store shares: the items (the store, embeddings, retries), the
    start-up, the default tenant and the limits."""

    items: ItemAccess[ContextItemStore]
    ready: Callable[[], Awaitable[None]]
    default_tenant: str
    max_content_length: int
    max_query_length: int
    max_limit: int
    search_mode: SearchMode

    def tenant(self, tenant_id: str | None) -> str:
        return check_tenant(self.default_tenant if tenant_id is None else tenant_id)


class SearchOptions(TypedDict, total=False):
    """The keyword arguments of every layer's ``search`` but its own filter."""

    limit: int | None
    tags: Sequence[str] | None
    mode: SearchMode | str | None
    min_score: float | None
    tenant_id: str | None


class ListOptions(TypedDict, total=False):
    """The keyword arguments of every layer's ``list`` but its own filter."""

    tags: Sequence[str] | None
    limit: int | None
    cursor: str | None
    tenant_id: str | None


def _known(call: str, options: type, given: Mapping[str, Any]) -> None:
    """An unknown keyword is the TypeError any unexpected keyword argument is."""
    for name in given:
        if name not in options.__annotations__:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")


def check_tags(tags: object) -> list[str]:
    return check_strings("tags", tags, max_items=MAX_TAGS)


class LayerStore(Generic[M]):
    """One layer's items. A layer names its model and where the model's fields come from: the
    record's key, category and text, and ``data`` (field → default when the record lacks it;
    a data field that is also the key field falls back to the key)."""

    kind: ClassVar[ItemKind]
    noun: ClassVar[str]
    model_type: type[M]
    key_field: ClassVar[str]
    category_field: ClassVar[str]
    #: The category of a record stored without one.
    default_category: ClassVar[str]
    #: The values a category takes (None: any key).
    categories: ClassVar[type[StrEnum] | None] = None
    content_field: ClassVar[str | None] = None
    data: ClassVar[Mapping[str, Any]]
    #: Saving an existing key adds a version (instead of replacing the item).
    versioned: ClassVar[bool] = False

    def __init__(self, ctx: ItemContext) -> None:
        self._ctx = ctx

    def model(self, record: ContextRecord) -> M:
        """The public model of a stored record."""
        values: dict[str, Any] = {
            "id": record.id,
            "version": record.version,
            "is_latest": record.is_latest,
            "tags": record.tags,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            self.key_field: record.key,
            self.category_field: record.category or self.default_category,
        }
        if self.content_field is not None:
            values[self.content_field] = record.content
        for name, default in self.data.items():
            values[name] = record.data.get(name, values.get(name, default))
        return self.model_type.model_validate(values)

    def _key(self, key: object) -> str:
        """The stored key of the item that ``key`` names."""
        return check_key("key", key)

    def _category(self, value: object) -> str | None:
        """A category given as a filter or on save, checked (None: not given)."""
        if value is None:
            return None
        if self.categories is None:
            return check_key(self.category_field, value)
        return check_choice(self.category_field, value, self.categories).value

    async def _call(self, operation: str, fn: Callable[[], Awaitable[E]]) -> E:
        await self._ctx.ready()
        return await self._ctx.items.retry.run(f"{self.kind.value} {operation}", fn)

    async def _previous(self, tenant: str, key: str) -> ContextRecord | None:
        """The latest record stored under ``key``, if any."""
        found = await self._call(
            "get", lambda: self._ctx.items.store.get_item(tenant, self.kind, key)
        )
        return found[0] if found else None

    async def _save(
        self,
        tenant: str,
        key: str,
        category: str | None,
        text: str,
        data: dict[str, Any],
        tags: list[str],
    ) -> M:
        check_content(text, self._ctx.max_content_length)
        vector = (await self._call("embed", lambda: self._ctx.items.embed(tenant, [text])))[0]
        record = await self._call(
            "save",
            lambda: self._ctx.items.store.put_item(
                NewContextRecord(tenant, self.kind, key, category, text, data, tags, vector),
                versioned=self.versioned,
            ),
        )
        return self.model(record)

    def _not_found(self, tenant: str, key: str) -> LaminaError:
        return LaminaError(
            ErrorCode.ITEM_NOT_FOUND,
            f"no {self.noun} {key!r} in tenant {tenant!r}",
            details={"kind": self.kind.value, "key": key},
        )

    async def _records(self, key: str, tenant_id: str | None, versions: bool) -> list[M]:
        tenant = self._ctx.tenant(tenant_id)
        name = self._key(key)
        records = await self._call(
            "get",
            lambda: self._ctx.items.store.get_item(tenant, self.kind, name, all_versions=versions),
        )
        if not records:
            raise self._not_found(tenant, name)
        return [self.model(r) for r in records]

    async def get(self, key: str, *, tenant_id: str | None = None) -> M:
        """The latest version of the item with this key (or id); ITEM_NOT_FOUND if none."""
        return (await self._records(key, tenant_id, False))[0]

    async def delete(self, key: str, *, tenant_id: str | None = None) -> int:
        """Delete the item (every version); returns the rows deleted. ITEM_NOT_FOUND if none."""
        tenant = self._ctx.tenant(tenant_id)
        name = self._key(key)
        count = await self._call(
            "delete", lambda: self._ctx.items.store.delete_item(tenant, self.kind, name)
        )
        if count == 0:
            raise self._not_found(tenant, name)
        return count

    async def _list(self, category: object, options: ListOptions) -> ItemPage[M]:
        """``list`` of every layer: ``category`` is the layer's own filter."""
        _known("list", ListOptions, options)
        wanted_category = self._category(category)
        tenant = self._ctx.tenant(options.get("tenant_id"))
        wanted = check_tags(options.get("tags"))
        size = check_limit(options.get("limit"), default=50, maximum=self._ctx.max_limit)
        after = check_cursor(options.get("cursor"))
        records, next_cursor, total = await self._call(
            "list",
            lambda: self._ctx.items.store.list_items(
                tenant, self.kind, category=wanted_category, tags=wanted, limit=size, cursor=after
            ),
        )
        return ItemPage[M](
            items=[self.model(r) for r in records], next_cursor=next_cursor, total_count=total
        )

    async def _search(
        self, query: str, category: object, options: SearchOptions
    ) -> list[ItemHit[M]]:
        """``search`` of every layer: ``category`` is the layer's own filter."""
        _known("search", SearchOptions, options)
        hits = await self.search_records(query, category=self._category(category), **options)
        return [ItemHit[M](item=self.model(r), score=s) for r, s in hits]

    async def search_records(
        self,
        query: str,
        *,
        limit: int | None = None,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        mode: SearchMode | str | None = None,
        min_score: float | None = None,
        tenant_id: str | None = None,
        vector: Vector | None = None,
    ) -> list[tuple[ContextRecord, float]]:
        """Search at the record level (the retriever uses this, sharing one query vector)."""
        tenant = self._ctx.tenant(tenant_id)
        text = check_query(query, self._ctx.max_query_length)
        size = check_limit(limit, default=5, maximum=self._ctx.max_limit)
        wanted = check_tags(tags)
        how = self._ctx.search_mode if mode is None else check_choice("mode", mode, SearchMode)
        floor = None if min_score is None else check_fraction("min_score", min_score)
        await self._ctx.ready()
        hits = await self._ctx.items.search(
            f"{self.kind.value} search",
            tenant,
            self.kind,
            text,
            mode=how,
            limit=size,
            category=category,
            tags=tuple(wanted),
            vector=vector,
        )
        return [h for h in hits if floor is None or h[1] >= floor]
