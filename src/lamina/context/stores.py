"""The four searchable context layers: user knowledge, agent learnings, skill patterns and
external references. Each has save, search, list, get and delete, tenant-scoped, over the
store's context items (keyword and semantic search, like memories)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from lamina.context.models import (
    AgentLearning,
    ExternalReference,
    KnowledgeCategory,
    LearningCategory,
    SkillPattern,
    SkillType,
    UserKnowledge,
)
from lamina.embeddings.query_cache import QueryVectors
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.layers import check_tenant
from lamina.memory.models import SearchMode
from lamina.memory.validation import check_content, check_metadata, check_query
from lamina.retry import RetryPolicy
from lamina.store.base import Vector
from lamina.store.context_base import (
    ContextItemStore,
    ContextRecord,
    ItemKind,
    ItemQuery,
    NewContextRecord,
)
from lamina.text import analyze

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E")

MAX_KEY_LENGTH = 256
MAX_TAGS = 64


class ItemHit(BaseModel, Generic[M]):
    model_config = ConfigDict(frozen=True)

    item: M
    score: float


class ItemPage(BaseModel, Generic[M]):
    model_config = ConfigDict(frozen=True)

    items: list[M]
    next_cursor: str | None
    total_count: int


@dataclass
class ItemContext:
    """What every layer store shares: the store, embeddings, retries, limits."""

    store: ContextItemStore
    embed: Callable[[str, Sequence[str]], Awaitable[Vector]]
    queries: QueryVectors
    retry: RetryPolicy
    ready: Callable[[], Awaitable[None]]
    default_tenant: str
    max_content_length: int
    max_query_length: int
    max_limit: int
    search_mode: SearchMode
    semantic_weight: float

    def tenant(self, tenant_id: str | None) -> str:
        return check_tenant(self.default_tenant if tenant_id is None else tenant_id)


def _invalid(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def check_key(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _invalid(f"{name} must be a non-empty string", field=name)
    if len(value) > MAX_KEY_LENGTH or "\x00" in value:
        raise _invalid(
            f"{name} must be at most {MAX_KEY_LENGTH} characters, without NUL", field=name
        )
    return value.strip()


def check_tags(tags: object) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, list | tuple):
        raise _invalid("tags must be a list of strings", field="tags")
    if not all(isinstance(t, str) and t.strip() for t in tags) or len(tags) > MAX_TAGS:
        raise _invalid(f"tags must be at most {MAX_TAGS} non-empty strings", field="tags")
    return list(dict.fromkeys(t.strip() for t in tags))


def check_text(name: str, value: object, max_length: int) -> str:
    """Optional text: a string (may be empty) of at most ``max_length`` characters."""
    if value is None:
        return ""
    if not isinstance(value, str) or "\x00" in value:
        raise _invalid(f"{name} must be a string without NUL characters", field=name)
    if len(value) > max_length:
        raise LaminaError(
            ErrorCode.CONTENT_TOO_LONG,
            f"{name} is {len(value)} characters; the maximum is {max_length}",
            details={"field": name, "max_length": max_length},
        )
    return value


def check_choice(name: str, value: object, choices: type[E]) -> E:
    try:
        return choices(value)  # type: ignore[call-arg]
    except ValueError:
        valid = [c.value for c in choices]  # type: ignore[attr-defined]
        raise _invalid(
            f"{name} {value!r} is not one of {', '.join(valid)}", field=name, valid=valid
        ) from None


def check_json_object(name: str, value: object) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        return check_metadata(value)
    except LaminaError as exc:
        raise _invalid(exc.message.replace("metadata", name), field=name) from None


class _LayerStore(ABC, Generic[M]):
    """Shared plumbing of one kind of item; subclasses say how records map to models."""

    kind: ItemKind
    versioned = False
    noun = "item"

    def __init__(self, ctx: ItemContext) -> None:
        self._ctx = ctx

    @abstractmethod
    def _model(self, record: ContextRecord) -> M:
        """The public model of a stored record."""

    async def _call(self, operation: str, fn: Callable[[], Awaitable[E]]) -> E:
        await self._ctx.ready()
        return await self._ctx.retry.run(f"{self.kind.value} {operation}", fn)

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
        vector = (await self._call("embed", lambda: self._ctx.embed(tenant, [text])))[0]
        record = await self._call(
            "save",
            lambda: self._ctx.store.put_item(
                NewContextRecord(tenant, self.kind, key, category, text, data, tags, vector),
                versioned=self.versioned,
            ),
        )
        return self._model(record)

    async def _records(self, key: str, tenant_id: str | None, versions: bool) -> list[M]:
        tenant = self._ctx.tenant(tenant_id)
        name = check_key("key", key)
        records = await self._call(
            "get",
            lambda: self._ctx.store.get_item(tenant, self.kind, name, all_versions=versions),
        )
        if not records:
            raise LaminaError(
                ErrorCode.ITEM_NOT_FOUND,
                f"no {self.noun} {name!r} in tenant {tenant!r}",
                details={"kind": self.kind.value, "key": name},
            )
        return [self._model(r) for r in records]

    async def get(self, key: str, *, tenant_id: str | None = None) -> M:
        """The latest version of the item with this key (or id); ITEM_NOT_FOUND if none."""
        return (await self._records(key, tenant_id, False))[0]

    async def delete(self, key: str, *, tenant_id: str | None = None) -> int:
        """Delete the item (every version); returns the rows deleted. ITEM_NOT_FOUND if none."""
        tenant = self._ctx.tenant(tenant_id)
        name = check_key("key", key)
        count = await self._call(
            "delete", lambda: self._ctx.store.delete_item(tenant, self.kind, name)
        )
        if count == 0:
            raise LaminaError(
                ErrorCode.ITEM_NOT_FOUND,
                f"no {self.noun} {name!r} in tenant {tenant!r}",
                details={"kind": self.kind.value, "key": name},
            )
        return count

    def _limit(self, limit: int | None, default: int) -> int:
        value = default if limit is None else limit
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid("limit must be an integer", field="limit")
        if not 1 <= value <= self._ctx.max_limit:
            raise _invalid(f"limit must be from 1 to {self._ctx.max_limit}", field="limit")
        return value

    async def _list(
        self,
        category: str | None,
        tags: Sequence[str] | None,
        limit: int | None,
        cursor: str | None,
        tenant_id: str | None,
    ) -> ItemPage[M]:
        tenant = self._ctx.tenant(tenant_id)
        wanted = check_tags(tags)
        size = self._limit(limit, 50)
        if cursor is not None and not isinstance(cursor, str):
            raise _invalid("cursor must be a string from next_cursor", field="cursor")
        records, next_cursor, total = await self._call(
            "list",
            lambda: self._ctx.store.list_items(
                tenant, self.kind, category=category, tags=wanted, limit=size, cursor=cursor
            ),
        )
        return ItemPage[M](
            items=[self._model(r) for r in records], next_cursor=next_cursor, total_count=total
        )

    async def _search(
        self,
        query: str,
        *,
        limit: int | None,
        category: str | None,
        tags: Sequence[str] | None,
        mode: SearchMode | str | None,
        min_score: float | None,
        tenant_id: str | None,
    ) -> list[ItemHit[M]]:
        hits = await self.search_records(
            query,
            limit=limit,
            category=category,
            tags=tags,
            mode=mode,
            min_score=min_score,
            tenant_id=tenant_id,
        )
        return [ItemHit[M](item=self._model(r), score=s) for r, s in hits]

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
        size = self._limit(limit, 5)
        wanted = check_tags(tags)
        how = self._ctx.search_mode if mode is None else check_choice("mode", mode, SearchMode)
        if min_score is not None and (
            isinstance(min_score, bool) or not isinstance(min_score, int | float)
        ):
            raise _invalid("min_score must be a number", field="min_score")
        terms = tuple(analyze(text))
        if how is SearchMode.KEYWORD and not terms:
            return []
        if vector is None and how is not SearchMode.KEYWORD:
            vector = await self._ctx.queries.get(tenant, text)
        hits = await self._call(
            "search",
            lambda: self._ctx.store.search_items(
                ItemQuery(
                    tenant,
                    self.kind,
                    text,
                    terms,
                    vector,
                    how,
                    size,
                    category,
                    tuple(wanted),
                    self._ctx.semantic_weight,
                )
            ),
        )
        return [h for h in hits if min_score is None or h[1] >= min_score]

    def model(self, record: ContextRecord) -> M:
        return self._model(record)


def _base(record: ContextRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "version": record.version,
        "is_latest": record.is_latest,
        "tags": record.tags,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


class KnowledgeStore(_LayerStore[UserKnowledge]):
    """``ms.context.knowledge``: what the user taught the agent (rules, facts, preferences...).

    Saving an existing key adds a new version; the latest is listed and searched, older ones
    stay readable through ``versions``.
    """

    kind = ItemKind.KNOWLEDGE
    versioned = True
    noun = "knowledge"

    def _model(self, record: ContextRecord) -> UserKnowledge:
        data = record.data
        return UserKnowledge(
            **_base(record),
            key=record.key,
            category=KnowledgeCategory(record.category or "fact"),
            content=record.content,
            source=data.get("source", ""),
            use_count=int(data.get("use_count", 0)),
            relevance_score=float(data.get("relevance_score", 1.0)),
        )

    async def save(
        self,
        key: str,
        content: str,
        *,
        category: KnowledgeCategory | str = KnowledgeCategory.FACT,
        tags: Sequence[str] | None = None,
        source: str = "",
        relevance_score: float | None = None,
        tenant_id: str | None = None,
    ) -> UserKnowledge:
        tenant = self._ctx.tenant(tenant_id)
        name = check_key("key", key)
        text = check_content(content, self._ctx.max_content_length)
        kind = check_choice("category", category, KnowledgeCategory)
        labels = check_tags(tags)
        origin = check_text("source", source, MAX_KEY_LENGTH)
        relevance = 1.0 if relevance_score is None else relevance_score
        if (
            isinstance(relevance, bool)
            or not isinstance(relevance, int | float)
            or not 0.0 <= relevance <= 1.0
        ):
            raise _invalid("relevance_score must be a number from 0 to 1", field="relevance_score")
        previous = await self._call(
            "get", lambda: self._ctx.store.get_item(tenant, self.kind, name)
        )
        use_count = int(previous[0].data.get("use_count", 0)) if previous else 0
        data = {"source": origin, "use_count": use_count, "relevance_score": float(relevance)}
        return await self._save(tenant, name, kind.value, text, data, labels)

    async def versions(self, key: str, *, tenant_id: str | None = None) -> list[UserKnowledge]:
        """Every version of ``key``, newest first."""
        return await self._records(key, tenant_id, True)

    async def record_use(
        self, keys: Sequence[str] | Mapping[str, int], *, tenant_id: str | None = None
    ) -> int:
        """Count uses of keys (a list: one each; a mapping: that many). The retriever calls
        this for what it returned. Returns how many items were found."""
        tenant = self._ctx.tenant(tenant_id)
        counts = dict(keys) if isinstance(keys, Mapping) else dict(Counter(keys))
        for key, n in counts.items():
            check_key("key", key)
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise _invalid("use counts must be positive integers", field="keys")
        increments = counts

        def bump(key: str, data: dict[str, Any]) -> dict[str, Any]:
            return {**data, "use_count": int(data.get("use_count", 0)) + increments[key]}

        changed = await self._call(
            "record use",
            lambda: self._ctx.store.modify_items(tenant, self.kind, list(counts), bump),
        )
        return len(changed)

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        category: KnowledgeCategory | str | None = None,
        tags: Sequence[str] | None = None,
        mode: SearchMode | str | None = None,
        min_score: float | None = None,
        tenant_id: str | None = None,
    ) -> list[ItemHit[UserKnowledge]]:
        cat = None if category is None else check_choice("category", category, KnowledgeCategory)
        return await self._search(
            query,
            limit=limit,
            category=None if cat is None else cat.value,
            tags=tags,
            mode=mode,
            min_score=min_score,
            tenant_id=tenant_id,
        )

    async def list(
        self,
        *,
        category: KnowledgeCategory | str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
    ) -> ItemPage[UserKnowledge]:
        cat = None if category is None else check_choice("category", category, KnowledgeCategory)
        return await self._list(None if cat is None else cat.value, tags, limit, cursor, tenant_id)


def learning_key(trigger: str) -> str:
    """One learning per trigger, whatever its case and spacing."""
    return re.sub(r"\s+", " ", trigger.strip().lower())


class LearningStore(_LayerStore[AgentLearning]):
    """``ms.context.learnings``: when ``trigger`` happens, ``fix`` works (with what confidence).

    Saving a known trigger again counts another occurrence and refreshes the fields given.
    ``record_outcome`` counts whether applying the fix worked; confidence is
    (successes + 1) / (outcomes + 2), 0.5 before any outcome.
    """

    kind = ItemKind.LEARNING
    noun = "learning"

    def _model(self, record: ContextRecord) -> AgentLearning:
        data = record.data
        return AgentLearning(
            **_base(record),
            trigger=data.get("trigger", record.key),
            error_pattern=data.get("error_pattern", ""),
            diagnosis=data.get("diagnosis", ""),
            fix=data.get("fix", ""),
            category=LearningCategory(record.category or "general"),
            occurrence_count=int(data.get("occurrence_count", 1)),
            success_count=int(data.get("success_count", 0)),
            confidence=float(data.get("confidence", 0.5)),
        )

    async def save(
        self,
        trigger: str,
        fix: str = "",
        *,
        error_pattern: str = "",
        diagnosis: str = "",
        category: LearningCategory | str | None = None,
        tags: Sequence[str] | None = None,
        tenant_id: str | None = None,
    ) -> AgentLearning:
        """Record a learning; a known trigger (any case and spacing) counts one more
        occurrence and keeps what this call leaves empty (category: general when new)."""
        tenant = self._ctx.tenant(tenant_id)
        when = check_content(check_key("trigger", trigger), MAX_KEY_LENGTH)
        limit = self._ctx.max_content_length
        fields = {
            "trigger": when,
            "error_pattern": check_text("error_pattern", error_pattern, limit),
            "diagnosis": check_text("diagnosis", diagnosis, limit),
            "fix": check_text("fix", fix, limit),
        }
        kind = None if category is None else check_choice("category", category, LearningCategory)
        labels = check_tags(tags)
        key = learning_key(when)
        previous = await self._call("get", lambda: self._ctx.store.get_item(tenant, self.kind, key))
        data: dict[str, Any] = {
            "occurrence_count": 1,
            "success_count": 0,
            "outcome_count": 0,
            "confidence": 0.5,
        }
        if previous:
            old = previous[0].data
            data = {k: old.get(k, v) for k, v in data.items()}
            data["occurrence_count"] = int(old.get("occurrence_count", 1)) + 1
            # A repeat that leaves a field empty keeps what was learned before.
            for name in ("error_pattern", "diagnosis", "fix"):
                if not fields[name]:
                    fields[name] = old.get(name, "")
            labels = list(dict.fromkeys([*previous[0].tags, *labels]))
            if kind is None:
                kind = LearningCategory(previous[0].category or "general")
        data.update(fields)
        text = "\n".join(
            v for v in (when, fields["error_pattern"], fields["diagnosis"], fields["fix"]) if v
        )
        category_value = (kind or LearningCategory.GENERAL).value
        return await self._save(tenant, key, category_value, text, data, labels)

    async def record_outcome(
        self, trigger: str, success: bool, *, tenant_id: str | None = None
    ) -> AgentLearning:
        """Count one application of the fix, successful or not; returns the learning."""
        tenant = self._ctx.tenant(tenant_id)
        key = learning_key(check_key("trigger", trigger))
        if not isinstance(success, bool):
            raise _invalid("success must be true or false", field="success")

        def count(_key: str, data: dict[str, Any]) -> dict[str, Any]:
            outcomes = int(data.get("outcome_count", 0)) + 1
            wins = int(data.get("success_count", 0)) + (1 if success else 0)
            return {
                **data,
                "outcome_count": outcomes,
                "success_count": wins,
                "confidence": round((wins + 1) / (outcomes + 2), 6),
            }

        changed = await self._call(
            "record outcome",
            lambda: self._ctx.store.modify_items(tenant, self.kind, [key], count),
        )
        if not changed:
            raise LaminaError(
                ErrorCode.ITEM_NOT_FOUND,
                f"no learning for trigger {trigger!r} in tenant {tenant!r}",
                details={"kind": self.kind.value, "key": key},
            )
        return self._model(changed[0])

    async def get(self, key: str, *, tenant_id: str | None = None) -> AgentLearning:
        """The learning for this trigger (any case and spacing) or id (ids are lower-case,
        so normalising them changes nothing)."""
        return await super().get(learning_key(check_key("key", key)), tenant_id=tenant_id)

    async def delete(self, key: str, *, tenant_id: str | None = None) -> int:
        return await super().delete(learning_key(check_key("key", key)), tenant_id=tenant_id)

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        category: LearningCategory | str | None = None,
        tags: Sequence[str] | None = None,
        mode: SearchMode | str | None = None,
        min_score: float | None = None,
        tenant_id: str | None = None,
    ) -> list[ItemHit[AgentLearning]]:
        cat = None if category is None else check_choice("category", category, LearningCategory)
        return await self._search(
            query,
            limit=limit,
            category=None if cat is None else cat.value,
            tags=tags,
            mode=mode,
            min_score=min_score,
            tenant_id=tenant_id,
        )

    async def list(
        self,
        *,
        category: LearningCategory | str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
    ) -> ItemPage[AgentLearning]:
        cat = None if category is None else check_choice("category", category, LearningCategory)
        return await self._list(None if cat is None else cat.value, tags, limit, cursor, tenant_id)


class SkillStore(_LayerStore[SkillPattern]):
    """``ms.context.skills``: reusable procedures by name. Saving a name again replaces the
    skill (its version number goes up)."""

    kind = ItemKind.SKILL
    noun = "skill"

    def _model(self, record: ContextRecord) -> SkillPattern:
        data = record.data
        return SkillPattern(
            **_base(record),
            name=record.key,
            description=data.get("description", ""),
            type=SkillType(record.category or "composite"),
            definition=data.get("definition", ""),
            parameters=data.get("parameters", {}),
        )

    async def save(
        self,
        name: str,
        description: str,
        *,
        type: SkillType | str = SkillType.COMPOSITE,
        definition: str = "",
        parameters: dict[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        tenant_id: str | None = None,
    ) -> SkillPattern:
        tenant = self._ctx.tenant(tenant_id)
        key = check_key("name", name)
        about = check_content(description, self._ctx.max_content_length)
        kind = check_choice("type", type, SkillType)
        data = {
            "description": about,
            "definition": check_text("definition", definition, self._ctx.max_content_length),
            "parameters": check_json_object("parameters", parameters),
        }
        return await self._save(tenant, key, kind.value, f"{key}\n{about}", data, check_tags(tags))

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        type: SkillType | str | None = None,
        tags: Sequence[str] | None = None,
        mode: SearchMode | str | None = None,
        min_score: float | None = None,
        tenant_id: str | None = None,
    ) -> list[ItemHit[SkillPattern]]:
        kind = None if type is None else check_choice("type", type, SkillType)
        return await self._search(
            query,
            limit=limit,
            category=None if kind is None else kind.value,
            tags=tags,
            mode=mode,
            min_score=min_score,
            tenant_id=tenant_id,
        )

    async def list(
        self,
        *,
        type: SkillType | str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
    ) -> ItemPage[SkillPattern]:
        kind = None if type is None else check_choice("type", type, SkillType)
        return await self._list(
            None if kind is None else kind.value, tags, limit, cursor, tenant_id
        )


class ReferenceStore(_LayerStore[ExternalReference]):
    """``ms.context.references``: documents, URLs, repositories the agent may consult.
    Saving a name again replaces the reference (its version number goes up)."""

    kind = ItemKind.REFERENCE
    noun = "reference"

    def _model(self, record: ContextRecord) -> ExternalReference:
        data = record.data
        return ExternalReference(
            **_base(record),
            name=record.key,
            ref_type=record.category or "",
            location=data.get("location", ""),
            summary=data.get("summary", ""),
            metadata=data.get("metadata", {}),
        )

    async def save(
        self,
        name: str,
        location: str,
        *,
        ref_type: str = "url",
        summary: str = "",
        metadata: dict[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        tenant_id: str | None = None,
    ) -> ExternalReference:
        tenant = self._ctx.tenant(tenant_id)
        key = check_key("name", name)
        where = check_key("location", location)
        kind = check_key("ref_type", ref_type)
        about = check_text("summary", summary, self._ctx.max_content_length)
        data = {
            "location": where,
            "summary": about,
            "metadata": check_json_object("metadata", metadata),
        }
        text = "\n".join(v for v in (key, about) if v)
        return await self._save(tenant, key, kind, text, data, check_tags(tags))

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        ref_type: str | None = None,
        tags: Sequence[str] | None = None,
        mode: SearchMode | str | None = None,
        min_score: float | None = None,
        tenant_id: str | None = None,
    ) -> list[ItemHit[ExternalReference]]:
        return await self._search(
            query,
            limit=limit,
            category=None if ref_type is None else check_key("ref_type", ref_type),
            tags=tags,
            mode=mode,
            min_score=min_score,
            tenant_id=tenant_id,
        )

    async def list(
        self,
        *,
        ref_type: str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
    ) -> ItemPage[ExternalReference]:
        kind = None if ref_type is None else check_key("ref_type", ref_type)
        return await self._list(kind, tags, limit, cursor, tenant_id)
