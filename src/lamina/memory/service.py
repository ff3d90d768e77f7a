"""The memory service: validation, identifier resolution, fan-out search, merge, metrics."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from lamina.buffer import BackgroundBuffer
from lamina.config import MemorySettings
from lamina.embeddings.query_cache import QueryVectors
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import parse_filter
from lamina.memory.layers import (
    IDENTIFIER_NAMES,
    Identifiers,
    MemoryLayer,
    accessible_layers,
    check_tenant,
    parse_layer,
    parse_layers,
    scope_for,
    scope_key,
)
from lamina.memory.models import (
    DeleteResult,
    HierarchyLink,
    HistoryEvent,
    MemoryEntry,
    MemoryPage,
    SearchHit,
    SearchMode,
)
from lamina.memory.validation import (
    check_actor,
    check_content,
    check_id,
    check_metadata,
    check_query,
)
from lamina.metrics import MemoryMetrics
from lamina.retry import RetryPolicy
from lamina.store.base import LayerSearch, MemoryStore, NewMemory, Scope, ScoredMemory, Vector
from lamina.text import analyze

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The parent a project, team or org has when neither it nor the tenant registered one.
DEFAULT_PARENT = "default"
_LEVELS = {"project": "team", "team": "org", "org": "company"}
#: Counting memories per layer costs a scan on PostgreSQL: searches refresh the gauge at most
#: this often (seconds).
STORAGE_GAUGE_INTERVAL = 10.0


class MemoryInput(BaseModel):
    """One memory for ``bulk_add``."""

    model_config = ConfigDict(extra="forbid")

    content: str
    layer: str
    agent_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    team_id: str | None = None
    org_id: str | None = None
    company_id: str | None = None
    metadata: dict[str, Any] | None = None


def _check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise LaminaError(ErrorCode.INVALID_ARGUMENT, f"{name} must be true or false")
    return value


class WriteGuard(Protocol):
    """Checks content entering ``layer``; ``identifiers`` are resolved through the hierarchy."""

    async def __call__(
        self, tenant: str, layer: str, identifiers: Mapping[str, str], content: str
    ) -> list[dict[str, Any]]: ...


def _flag(entry: MemoryEntry, flagged: Mapping[str, list[dict[str, Any]]]) -> MemoryEntry:
    found = flagged.get(entry.id)
    return entry.model_copy(update={"violations": found}) if found else entry


class MemoryService:
    """``ms.memory``: add, search, get, update, delete, list, history and hierarchy."""

    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings,
        *,
        default_tenant: str,
        metrics: MemoryMetrics,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
        queries: QueryVectors | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._default_tenant = default_tenant
        self._metrics = metrics
        self._retry = retry
        self._ready = ready
        #: Embeds memories added with background_embedding=True, per tenant.
        self.embedding_buffer: BackgroundBuffer[str] = BackgroundBuffer(
            "embedding buffer", self._embed_in_background, queue_size=1024, workers=1
        )
        self._queries = queries or QueryVectors(
            lambda tenant, texts: store.generate_embedding(tenant, texts, cache=False), retry
        )
        self._gauge_refreshed = -float("inf")
        #: Set by the runtime: checks content entering a shared layer (governance). It raises
        #: POLICY_VIOLATION on a block and returns the violations that do not block.
        self.write_guard: WriteGuard | None = None

    # -- helpers ----------------------------------------------------------------------------

    async def _observe(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        start = time.perf_counter()
        self._metrics.operations.labels(operation).inc()
        try:
            await self._ready()
            return await call()
        except LaminaError as exc:
            self._metrics.errors.labels(exc.code.value).inc()
            raise
        except Exception as exc:
            self._metrics.errors.labels(ErrorCode.INTERNAL_ERROR.value).inc()
            log.exception("memory %s failed unexpectedly", operation)
            raise LaminaError(
                ErrorCode.INTERNAL_ERROR, f"internal error during {operation} (see the log)"
            ) from exc
        finally:
            self._metrics.latency.labels(operation).observe(time.perf_counter() - start)

    def _tenant(self, tenant_id: str | None) -> str:
        return check_tenant(self._default_tenant if tenant_id is None else tenant_id)

    def _limit(self, limit: int | None, default: int) -> int:
        value = default if limit is None else limit
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not (1 <= value <= self._settings.max_limit)
        ):
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"limit must be an integer from 1 to {self._settings.max_limit}",
                details={"max_limit": self._settings.max_limit},
            )
        return value

    async def _parent(self, tenant: str, level: str, child: str) -> str:
        found = await self._retry.run(
            "hierarchy", lambda: self._store.get_parent(tenant, level, child)
        )
        return found or DEFAULT_PARENT

    async def _resolve(self, tenant: str, ids: Identifiers) -> Identifiers:
        """Fill team, org and company from the registered hierarchy where not given."""
        team, org, company = ids.team_id, ids.org_id, ids.company_id
        if team is None and ids.project_id is not None:
            team = await self._parent(tenant, "project", ids.project_id)
        if org is None and team is not None:
            org = await self._parent(tenant, "team", team)
        if company is None and org is not None:
            company = await self._parent(tenant, "org", org)
        return ids.with_parents(team, org, company)

    async def _scopes(
        self, tenant: str, ids: Identifiers, layers: Sequence[str | MemoryLayer] | str | None
    ) -> list[Scope]:
        requested = parse_layers(layers)
        resolved = await self._resolve(tenant, ids)
        targets = requested if requested is not None else accessible_layers(resolved)
        if not targets:
            raise LaminaError(
                ErrorCode.MISSING_IDENTIFIER,
                "no memory layer is reachable: give user_id, project_id, team_id, org_id, "
                "company_id, or agent_id/session_id with user_id",
                details={"identifier": "user_id"},
            )
        scopes = []
        for layer in targets:
            scope = scope_for(layer, resolved)
            scopes.append(Scope(layer, scope, scope_key(layer, scope)))
        return scopes

    async def _embed_query(self, tenant: str, query: str) -> Vector:
        return await self._queries.get(tenant, query)

    def _merge(self, found: list[ScoredMemory], limit: int) -> list[SearchHit]:
        """Precedence, then score; near-duplicates keep the most specific layer."""
        found.sort(key=lambda s: (s.entry.layer.precedence, -s.score))
        kept: list[ScoredMemory] = []
        kept_vectors: list[Vector] = []
        threshold = self._settings.dedup_threshold
        for item in found:
            if (
                item.vector is not None
                and kept_vectors
                and float(np.max(np.stack(kept_vectors) @ item.vector)) >= threshold
            ):
                continue
            kept.append(item)
            if item.vector is not None:
                kept_vectors.append(item.vector)
            if len(kept) == limit:
                break
        return [
            SearchHit(
                memory=s.entry,
                score=s.score,
                semantic_score=s.semantic_score,
                keyword_score=s.keyword_score,
            )
            for s in kept
        ]

    # -- operations -------------------------------------------------------------------------

    async def add(
        self,
        content: str,
        *,
        layer: str | MemoryLayer,
        agent_id: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        project_id: str | None = None,
        team_id: str | None = None,
        org_id: str | None = None,
        company_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
        background_embedding: bool = False,
    ) -> MemoryEntry:
        """Store one memory in ``layer``; returns the full entry.

        ``background_embedding``: return without waiting for the embedding; the embedding
        buffer adds it shortly (keyword search finds the memory at once, semantic search
        once it is embedded)."""
        ids = dict(
            agent_id=agent_id,
            user_id=user_id,
            session_id=session_id,
            project_id=project_id,
            team_id=team_id,
            org_id=org_id,
            company_id=company_id,
        )

        async def run() -> MemoryEntry:
            tenant = self._tenant(tenant_id)
            defer = _check_flag("background_embedding", background_embedding)
            prepared, flagged = await self._prepare(
                tenant, [(content, layer, ids, metadata)], defer
            )
            new = prepared[0]
            who = check_actor(actor)
            entry = await self._retry.run("add", lambda: self._store.add(new, actor=who))
            if defer:
                self.embedding_buffer.trigger(tenant)
            return _flag(entry, flagged)

        return await self._observe("add", run)

    async def _prepare(
        self,
        tenant: str,
        items: Sequence[tuple[object, str | MemoryLayer, dict[str, str | None], object]],
        defer: bool = False,
    ) -> tuple[list[NewMemory], dict[str, list[dict[str, Any]]]]:
        """Checked, scoped and embedded memories, and the non-blocking policy violations
        found in them (by memory id)."""
        checked = []
        flagged: dict[str, list[dict[str, Any]]] = {}
        for content, layer, ids, metadata in items:
            mem_layer = parse_layer(layer)
            text = check_content(content, self._settings.max_content_length)
            meta = check_metadata(metadata)
            resolved = await self._resolve(tenant, Identifiers(**ids))
            scope = scope_for(mem_layer, resolved)
            mid = str(uuid.uuid4())
            if self.write_guard is not None:
                found = await self.write_guard(tenant, mem_layer.value, resolved.given(), text)
                if found:
                    flagged[mid] = found
            checked.append((mid, text, Scope(mem_layer, scope, scope_key(mem_layer, scope)), meta))
        texts = [text for _, text, _, _ in checked]
        if defer:
            return [
                NewMemory(mid, tenant, scope, text, meta, None)
                for mid, text, scope, meta in checked
            ], flagged
        vectors = await self._retry.run(
            "embed", lambda: self._store.generate_embedding(tenant, texts)
        )
        return [
            NewMemory(mid, tenant, scope, text, meta, vectors[i])
            for i, (mid, text, scope, meta) in enumerate(checked)
        ], flagged

    async def embed_pending(self, *, tenant_id: str | None = None, batch: int = 256) -> int:
        """Embed every memory of the tenant still waiting for its embedding (the embedding
        buffer does this in the background); returns how many were embedded."""
        tenant = self._tenant(tenant_id)
        await self._ready()
        done = 0
        while True:
            rows = await self._retry.run(
                "unembedded", lambda: self._store.unembedded(tenant, batch)
            )
            if not rows:
                return done
            stored = await self._embed_batch(tenant, rows)
            done += stored
            if stored == 0:  # changed under us since the read: leave them for the next run
                return done

    async def _embed_batch(self, tenant: str, rows: list[tuple[str, str]]) -> int:
        texts = [content for _, content in rows]
        vectors = await self._retry.run(
            "embed", lambda: self._store.generate_embedding(tenant, texts)
        )
        items = [(mid, content, vectors[i]) for i, (mid, content) in enumerate(rows)]
        stored: int = await self._retry.run(
            "set embeddings", lambda: self._store.set_embeddings(tenant, items)
        )
        return stored

    async def _embed_in_background(self, tenant: str) -> None:
        await self.embed_pending(tenant_id=tenant)

    async def flush_embeddings(self) -> None:
        """Wait until the embedding buffer has embedded what was queued."""
        await self.embedding_buffer.drain()

    async def bulk_add(
        self,
        items: Sequence[MemoryInput | Mapping[str, Any]],
        *,
        actor: str | None = None,
        tenant_id: str | None = None,
        background_embedding: bool = False,
    ) -> list[MemoryEntry]:
        """Store many memories in one transaction: all are stored or none
        (``background_embedding`` as for ``add``)."""

        async def run() -> list[MemoryEntry]:
            tenant = self._tenant(tenant_id)
            parsed: list[MemoryInput] = []
            for i, item in enumerate(items):
                try:
                    parsed.append(
                        item if isinstance(item, MemoryInput) else MemoryInput.model_validate(item)
                    )
                except ValidationError as exc:
                    raise LaminaError(
                        ErrorCode.INVALID_ARGUMENT,
                        f"item {i}: {exc.errors()[0]['msg']} at "
                        f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])}",
                        details={"index": i},
                    ) from None
            defer = _check_flag("background_embedding", background_embedding)
            prepared, flagged = await self._prepare(
                tenant,
                [
                    (p.content, p.layer, {n: getattr(p, n) for n in IDENTIFIER_NAMES}, p.metadata)
                    for p in parsed
                ],
                defer,
            )
            who = check_actor(actor)
            if not prepared:
                return []
            entries = await self._retry.run(
                "bulk_add", lambda: self._store.bulk_add(prepared, actor=who)
            )
            if defer:
                self.embedding_buffer.trigger(tenant)
            return [_flag(e, flagged) for e in entries]

        return await self._observe("bulk_add", run)

    async def search(
        self,
        query: str,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        project_id: str | None = None,
        team_id: str | None = None,
        org_id: str | None = None,
        company_id: str | None = None,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        mode: str | SearchMode = SearchMode.SEMANTIC,
        threshold: float | None = None,
        limit: int | None = None,
        tags: Sequence[str] | str | None = None,
        filters: Mapping[str, Any] | None = None,
        tenant_id: str | None = None,
    ) -> list[SearchHit]:
        """Search every reachable layer (or ``layers``) at once; see docs/search.md."""

        async def run() -> list[SearchHit]:
            tenant = self._tenant(tenant_id)
            text = check_query(query, self._settings.max_query_length)
            try:
                search_mode = SearchMode(mode)
            except ValueError:
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"invalid search mode {mode!r}; valid: semantic, keyword, hybrid",
                ) from None
            count = self._limit(limit, self._settings.search_limit)
            min_score = self._threshold(search_mode, threshold)
            flt = parse_filter(tags, filters)
            ids = Identifiers(
                agent_id, user_id, session_id, project_id, team_id, org_id, company_id
            )
            scopes = await self._scopes(tenant, ids, layers)
            vector = None
            if search_mode is not SearchMode.KEYWORD:
                vector = await self._embed_query(tenant, text)
            terms = tuple(analyze(text)) if search_mode is not SearchMode.SEMANTIC else ()
            requests = [
                LayerSearch(
                    tenant,
                    scope,
                    search_mode,
                    text,
                    vector,
                    terms,
                    min_score,
                    count * 2,
                    flt,
                    self._settings.hybrid_semantic_weight,
                )
                for scope in scopes
            ]
            per_layer = await asyncio.gather(*(self._search_layer(r) for r in requests))
            found: list[ScoredMemory] = []
            for scope, results in zip(scopes, per_layer, strict=True):
                self._metrics.search_results.labels(scope.layer.value).observe(len(results))
                found.extend(results)
            await self._refresh_storage_gauge()
            return self._merge(found, count)

        return await self._observe("search", run)

    async def _refresh_storage_gauge(self) -> None:
        """memory_storage_size, counted at most every STORAGE_GAUGE_INTERVAL seconds."""
        now = time.monotonic()
        if now - self._gauge_refreshed < STORAGE_GAUGE_INTERVAL:
            return
        self._gauge_refreshed = now
        for layer_name, size in (await self._store.count_by_layer(None)).items():
            self._metrics.storage_size.labels(layer_name).set(size)

    async def _search_layer(self, request: LayerSearch) -> list[ScoredMemory]:
        return await self._retry.run("search", lambda: self._store.search(request))

    async def _link(self, tenant: str, link: HierarchyLink) -> None:
        await self._retry.run(
            "hierarchy",
            lambda: self._store.set_parent(tenant, link.level, link.child_id, link.parent_id),
        )

    def _threshold(self, mode: SearchMode, threshold: float | None) -> float | None:
        if threshold is not None:
            if (
                isinstance(threshold, bool)
                or not isinstance(threshold, int | float)
                or not (threshold == threshold)
            ):
                raise LaminaError(ErrorCode.INVALID_ARGUMENT, "threshold must be a number")
            return float(threshold)
        if mode is SearchMode.SEMANTIC:
            return self._settings.search_threshold
        if mode is SearchMode.HYBRID:
            return self._settings.hybrid_threshold
        return None

    async def get(self, memory_id: str, *, tenant_id: str | None = None) -> MemoryEntry | None:
        """The memory, or None when no memory has this id."""

        async def run() -> MemoryEntry | None:
            tenant = self._tenant(tenant_id)
            mid = check_id(memory_id)
            return await self._retry.run("get", lambda: self._store.get(tenant, mid))

        return await self._observe("get", run)

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
    ) -> MemoryEntry:
        """New content is re-embedded; metadata merges (a None value removes the key)."""

        async def run() -> MemoryEntry:
            tenant = self._tenant(tenant_id)
            mid = check_id(memory_id)
            if content is None and metadata is None:
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT, "update needs content, metadata or both"
                )
            text = (
                None
                if content is None
                else check_content(content, self._settings.max_content_length)
            )
            patch = None if metadata is None else check_metadata(metadata, partial=True)
            who = check_actor(actor)
            vector = None
            flagged: list[dict[str, Any]] = []
            if text is not None:
                current = await self._store.get(tenant, mid)
                if current is None:
                    raise LaminaError(
                        ErrorCode.MEMORY_NOT_FOUND, f"memory {mid!r} not found", details={"id": mid}
                    )
                if self.write_guard is not None:
                    ids = await self._resolve(tenant, Identifiers(**current.identifiers))
                    flagged = await self.write_guard(tenant, current.layer.value, ids.given(), text)
                vector = (
                    await self._retry.run(
                        "embed", lambda: self._store.generate_embedding(tenant, [text])
                    )
                )[0]
            entry = await self._retry.run(
                "update",
                lambda: self._store.update(
                    tenant, mid, content=text, embedding=vector, metadata_patch=patch, actor=who
                ),
            )
            return _flag(entry, {entry.id: flagged})

        return await self._observe("update", run)

    async def delete(
        self, memory_id: str, *, actor: str | None = None, tenant_id: str | None = None
    ) -> DeleteResult:
        """Remove a memory; deleting an absent id succeeds too. History is kept."""

        async def run() -> DeleteResult:
            tenant = self._tenant(tenant_id)
            mid = check_id(memory_id)
            who = check_actor(actor)
            existed = await self._retry.run(
                "delete", lambda: self._store.delete(tenant, mid, actor=who)
            )
            return DeleteResult(success=True, id=mid, existed=existed)

        return await self._observe("delete", run)

    async def bulk_delete(
        self, memory_ids: Sequence[str], *, actor: str | None = None, tenant_id: str | None = None
    ) -> int:
        """Remove many memories in one transaction; returns how many existed."""

        async def run() -> int:
            tenant = self._tenant(tenant_id)
            ids = [check_id(m) for m in memory_ids]
            who = check_actor(actor)
            return await self._retry.run(
                "bulk_delete", lambda: self._store.bulk_delete(tenant, ids, actor=who)
            )

        return await self._observe("bulk_delete", run)

    async def history(self, memory_id: str, *, tenant_id: str | None = None) -> list[HistoryEvent]:
        """Every add, update and delete of the memory, oldest first (also once deleted)."""

        async def run() -> list[HistoryEvent]:
            tenant = self._tenant(tenant_id)
            mid = check_id(memory_id)
            events = await self._retry.run("history", lambda: self._store.history(tenant, mid))
            if not events:
                raise LaminaError(
                    ErrorCode.MEMORY_NOT_FOUND,
                    f"memory {mid!r} has no history: it never existed",
                    details={"id": mid},
                )
            return events

        return await self._observe("history", run)

    # -- hierarchy --------------------------------------------------------------------------

    async def register_hierarchy(
        self,
        *,
        project_id: str | None = None,
        team_id: str | None = None,
        org_id: str | None = None,
        company_id: str | None = None,
        tenant_id: str | None = None,
    ) -> list[HierarchyLink]:
        """Register the links given: project → team, team → org, org → company."""

        async def run() -> list[HierarchyLink]:
            tenant = self._tenant(tenant_id)
            ids = Identifiers(
                project_id=project_id, team_id=team_id, org_id=org_id, company_id=company_id
            )
            chain = [
                ("project", ids.project_id),
                ("team", ids.team_id),
                ("org", ids.org_id),
                ("company", ids.company_id),
            ]
            links = [
                HierarchyLink(level=level, child_id=child, parent_id=parent)
                for (level, child), (_, parent) in itertools.pairwise(chain)
                if child is not None and parent is not None
            ]
            if not links:
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT,
                    "give at least one adjacent pair: project_id+team_id, team_id+org_id or "
                    "org_id+company_id",
                )
            for link in links:
                await self._link(tenant, link)
            return links

        return await self._observe("register_hierarchy", run)

    async def set_hierarchy_defaults(
        self,
        *,
        team_id: str | None = None,
        org_id: str | None = None,
        company_id: str | None = None,
        tenant_id: str | None = None,
    ) -> list[HierarchyLink]:
        """Tenant-wide parents for projects, teams and orgs that registered none."""

        async def run() -> list[HierarchyLink]:
            tenant = self._tenant(tenant_id)
            ids = Identifiers(team_id=team_id, org_id=org_id, company_id=company_id)
            links = [
                HierarchyLink(level=child_level, child_id="*", parent_id=parent)
                for child_level, parent in (
                    ("project", ids.team_id),
                    ("team", ids.org_id),
                    ("org", ids.company_id),
                )
                if parent is not None
            ]
            if not links:
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT, "give team_id, org_id and/or company_id"
                )
            for link in links:
                await self._link(tenant, link)
            return links

        return await self._observe("set_hierarchy_defaults", run)

    async def resolve_identifiers(
        self,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        project_id: str | None = None,
        team_id: str | None = None,
        org_id: str | None = None,
        company_id: str | None = None,
        tenant_id: str | None = None,
    ) -> dict[str, Any]:
        """The identifiers after hierarchy resolution, and the layers they reach."""

        async def run() -> dict[str, Any]:
            tenant = self._tenant(tenant_id)
            ids = Identifiers(
                agent_id, user_id, session_id, project_id, team_id, org_id, company_id
            )
            resolved = await self._resolve(tenant, ids)
            return {
                "identifiers": resolved.given(),
                "layers": [layer.value for layer in accessible_layers(resolved)],
            }

        return await self._observe("resolve_identifiers", run)

    async def list(
        self,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        project_id: str | None = None,
        team_id: str | None = None,
        org_id: str | None = None,
        company_id: str | None = None,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        tags: Sequence[str] | str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
    ) -> MemoryPage:
        """Newest first; ``next_cursor`` continues where the page ended, unaffected by inserts."""

        async def run() -> MemoryPage:
            tenant = self._tenant(tenant_id)
            count = self._limit(limit, self._settings.list_limit)
            flt = parse_filter(tags, filters)
            if cursor is not None and not isinstance(cursor, str):
                raise LaminaError(ErrorCode.INVALID_ARGUMENT, "cursor must be a string")
            ids = Identifiers(
                agent_id, user_id, session_id, project_id, team_id, org_id, company_id
            )
            scopes = await self._scopes(tenant, ids, layers)
            return await self._retry.run(
                "list",
                lambda: self._store.list(tenant, scopes, flt, limit=count, cursor=cursor or None),
            )

        return await self._observe("list", run)
