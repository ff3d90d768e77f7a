"""The four searchable context layers: user knowledge, agent learnings, skill patterns and
external references. Each is the generic layer store over its model, plus only what is its
own: knowledge versions and use counts, learning occurrences and outcomes, and the name of
the argument that filters by category."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar, Generic, TypeVar, Unpack

from lamina.checks import (
    MAX_KEY_LENGTH,
    check_choice,
    check_content,
    check_flag,
    check_json_object,
    check_key,
    check_text,
    invalid,
)
from lamina.context.layer_store import (
    ItemHit,
    ItemPage,
    LayerStore,
    ListOptions,
    M,
    SearchOptions,
    check_tags,
)
from lamina.context.models import (
    AgentLearning,
    ExternalReference,
    KnowledgeCategory,
    LearningCategory,
    SkillPattern,
    SkillType,
    UserKnowledge,
)
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.items import ItemKind

C = TypeVar("C", bound=StrEnum)


class CategorisedStore(LayerStore[M], Generic[M, C]):
    """A layer whose items are listed and searched by ``category`` (one of ``C``)."""

    async def search(
        self, query: str, *, category: C | str | None = None, **options: Unpack[SearchOptions]
    ) -> list[ItemHit[M]]:
        return await self._search(query, category, options)

    async def list(
        self, *, category: C | str | None = None, **options: Unpack[ListOptions]
    ) -> ItemPage[M]:
        return await self._list(category, options)


class KnowledgeStore(CategorisedStore[UserKnowledge, KnowledgeCategory]):
    """``ms.context.knowledge``: what the user taught the agent (rules, facts, preferences...).

    Saving an existing key adds a new version; the latest is listed and searched, older ones
    stay readable through ``versions``.
    """

    kind = ItemKind.KNOWLEDGE
    noun = "knowledge"
    versioned = True
    model_type = UserKnowledge
    key_field = "key"
    category_field = "category"
    default_category = KnowledgeCategory.FACT
    categories = KnowledgeCategory
    content_field = "content"
    data: ClassVar[Mapping[str, Any]] = {"source": "", "use_count": 0, "relevance_score": 1.0}

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
            raise invalid("relevance_score must be a number from 0 to 1", "relevance_score")
        previous = await self._previous(tenant, name)
        use_count = int(previous.data.get("use_count", 0)) if previous else 0
        data = {
            "source": origin,
            "use_count": use_count,
            "relevance_score": float(relevance),
        }
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
                raise invalid("use counts must be positive integers", "keys")

        def bump(key: str, data: dict[str, Any]) -> dict[str, Any]:
            return {**data, "use_count": int(data.get("use_count", 0)) + counts[key]}

        changed = await self._call(
            "record use",
            lambda: self._ctx.items.store.modify_items(tenant, self.kind, list(counts), bump),
        )
        return len(changed)


def learning_key(trigger: str) -> str:
    """One learning per trigger, whatever its case and spacing."""
    return re.sub(r"\s+", " ", trigger.strip().lower())


class LearningStore(CategorisedStore[AgentLearning, LearningCategory]):
    """``ms.context.learnings``: when ``trigger`` happens, ``fix`` works (with what confidence).

    Saving a known trigger again counts another occurrence and refreshes the fields given.
    ``record_outcome`` counts whether applying the fix worked; confidence is
    (successes + 1) / (outcomes + 2), 0.5 before any outcome.

    ``get`` and ``delete`` take the trigger (any case and spacing) or the id (ids are
    lower-case, so normalising them changes nothing).
    """

    kind = ItemKind.LEARNING
    noun = "learning"
    model_type = AgentLearning
    key_field = "trigger"
    category_field = "category"
    default_category = LearningCategory.GENERAL
    categories = LearningCategory
    data: ClassVar[Mapping[str, Any]] = {
        "trigger": None,  # as given (the key is the normalised trigger)
        "error_pattern": "",
        "diagnosis": "",
        "fix": "",
        "occurrence_count": 1,
        "success_count": 0,
        "confidence": 0.5,
    }

    def _key(self, key: object) -> str:
        return learning_key(check_key("key", key))

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
        kind = self._category(category)
        labels = check_tags(tags)
        key = learning_key(when)
        previous = await self._previous(tenant, key)
        data: dict[str, Any] = {
            "occurrence_count": 1,
            "success_count": 0,
            "outcome_count": 0,
            "confidence": 0.5,
        }
        if previous:
            old = previous.data
            data = {k: old.get(k, v) for k, v in data.items()}
            data["occurrence_count"] = int(old.get("occurrence_count", 1)) + 1
            # A repeat that leaves a field empty keeps what was learned before.
            for name in ("error_pattern", "diagnosis", "fix"):
                if not fields[name]:
                    fields[name] = old.get(name, "")
            labels = list(dict.fromkeys([*previous.tags, *labels]))
            if kind is None:
                kind = previous.category or LearningCategory.GENERAL.value
        data.update(fields)
        text = "\n".join(
            v for v in (when, fields["error_pattern"], fields["diagnosis"], fields["fix"]) if v
        )
        return await self._save(
            tenant, key, kind or LearningCategory.GENERAL.value, text, data, labels
        )

    async def record_outcome(
        self, trigger: str, success: bool, *, tenant_id: str | None = None
    ) -> AgentLearning:
        """Count one application of the fix, successful or not; returns the learning."""
        tenant = self._ctx.tenant(tenant_id)
        key = learning_key(check_key("trigger", trigger))
        check_flag("success", success)

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
            lambda: self._ctx.items.store.modify_items(tenant, self.kind, [key], count),
        )
        if not changed:
            raise LaminaError(
                ErrorCode.ITEM_NOT_FOUND,
                f"no learning for trigger {trigger!r} in tenant {tenant!r}",
                details={"kind": self.kind.value, "key": key},
            )
        return self.model(changed[0])


class SkillStore(LayerStore[SkillPattern]):
    """``ms.context.skills``: reusable procedures by name. Saving a name again replaces the
    skill (its version number goes up)."""

    kind = ItemKind.SKILL
    noun = "skill"
    model_type = SkillPattern
    key_field = "name"
    category_field = "type"
    default_category = SkillType.COMPOSITE
    categories = SkillType
    data: ClassVar[Mapping[str, Any]] = {"description": "", "definition": "", "parameters": {}}

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
        self, query: str, *, type: SkillType | str | None = None, **options: Unpack[SearchOptions]
    ) -> list[ItemHit[SkillPattern]]:
        return await self._search(query, type, options)

    async def list(
        self, *, type: SkillType | str | None = None, **options: Unpack[ListOptions]
    ) -> ItemPage[SkillPattern]:
        return await self._list(type, options)


class ReferenceStore(LayerStore[ExternalReference]):
    """``ms.context.references``: documents, URLs, repositories the agent may consult.
    Saving a name again replaces the reference (its version number goes up)."""

    kind = ItemKind.REFERENCE
    noun = "reference"
    model_type = ExternalReference
    key_field = "name"
    category_field = "ref_type"
    default_category = ""
    data: ClassVar[Mapping[str, Any]] = {"location": "", "summary": "", "metadata": {}}

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
        self, query: str, *, ref_type: str | None = None, **options: Unpack[SearchOptions]
    ) -> list[ItemHit[ExternalReference]]:
        return await self._search(query, ref_type, options)

    async def list(
        self, *, ref_type: str | None = None, **options: Unpack[ListOptions]
    ) -> ItemPage[ExternalReference]:
        return await self._list(ref_type, options)
