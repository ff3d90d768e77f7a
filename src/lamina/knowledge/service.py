"""``ms.knowledge``: the git-backed knowledge repository. Every change is one commit with its
author and message; reads come from git, searches from the index in the database.

The service holds one part per concept and hands each call to it: the repository and its
index (``Repository``: git, the index, the tenant's lock, sync), the write path (``Writer``:
one commit per change, governed), item writes (``ItemWrites``), status transitions
(``Lifecycle``), reads of one item (``ItemReads``), searches (``ItemSearch``) and promotions
(``ms.knowledge.promotions``: ``Promotions``)."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Unpack

from lamina.knowledge.fields import ItemFields, ItemFilters
from lamina.knowledge.gitstore import GitStore
from lamina.knowledge.index import KnowledgeIndex
from lamina.knowledge.items import ItemWrites
from lamina.knowledge.lifecycle import Lifecycle
from lamina.knowledge.models import (
    HistoryEntry,
    KnowledgeChange,
    KnowledgeDiff,
    KnowledgeHit,
    KnowledgeItem,
    KnowledgeLayer,
    KnowledgePage,
    KnowledgeRecord,
    KnowledgeStatus,
    KnowledgeType,
)
from lamina.knowledge.policy import Violation
from lamina.knowledge.promotion import Promotions
from lamina.knowledge.reads import ItemReads
from lamina.knowledge.repository import OnProgress, Repository
from lamina.knowledge.search import ItemSearch
from lamina.knowledge.writes import Mutation, Plan, SecretGuard, WriteGuard, Writer
from lamina.memory.models import SearchMode

__all__ = ["KnowledgeService"]


class KnowledgeService:
    """create, update, set_status, get, history, diff, list, search, sync, rebuild, check."""

    def __init__(
        self,
        git: GitStore,
        index: KnowledgeIndex,
        *,
        default_tenant: str,
        ready: Callable[[], Awaitable[None]],
        max_content_length: int,
        max_query_length: int,
        max_limit: int,
        search_mode: SearchMode,
    ) -> None:
        self._repository = Repository(
            git,
            index,
            default_tenant=default_tenant,
            ready=ready,
            max_content_length=max_content_length,
            max_query_length=max_query_length,
            max_limit=max_limit,
            search_mode=search_mode,
        )
        self._writer = Writer(self._repository)
        self._items = ItemWrites(self._repository, self._writer)
        self._lifecycle = Lifecycle(self._repository, self._writer)
        self._reads = ItemReads(self._repository)
        self._search = ItemSearch(self._repository)
        #: ``ms.knowledge.promotions``: request, decide, get and list promotions.
        self.promotions = Promotions(self._repository, self._writer)

    # -- what the repository holds, and the guards the runtime sets ------------------------

    @property
    def git(self) -> GitStore:
        """The tenants' git repositories (the source of truth)."""
        return self._repository.git

    @property
    def index(self) -> KnowledgeIndex:
        """The search index that follows each repository's head."""
        return self._repository.index

    @property
    def guard(self) -> WriteGuard | None:
        """Set by the runtime: governance of writes (secrets, policies)."""
        return self._writer.guard

    @guard.setter
    def guard(self, value: WriteGuard | None) -> None:
        self._writer.guard = value

    @property
    def secret_guard(self) -> SecretGuard | None:
        """Set by the runtime: the secret scan of what is not an item's content (commit
        messages)."""
        return self._writer.secret_guard

    @secret_guard.setter
    def secret_guard(self, value: SecretGuard | None) -> None:
        self._writer.secret_guard = value

    # -- item writes and transitions (ItemWrites, Lifecycle) --------------------------------

    async def create(
        self,
        type: str | KnowledgeType,
        title: str,
        *,
        layer: str | KnowledgeLayer,
        layer_id: str | None = None,
        id: str | None = None,
        status: str | KnowledgeStatus = KnowledgeStatus.DRAFT,
        supersedes: Sequence[str] | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
        **fields: Unpack[ItemFields],
    ) -> KnowledgeChange:
        """Add an item (one commit). ``id`` defaults to ``<type>-<n>``, the next free number.
        An item starts as draft (or proposed / accepted when review happened elsewhere).
        ``fields``: its content (lamina.knowledge.fields.ItemFields; severity info unless
        given)."""
        return await self._items.create(
            type,
            title,
            layer=layer,
            layer_id=layer_id,
            id=id,
            status=status,
            supersedes=supersedes,
            author=author,
            message=message,
            tenant_id=tenant_id,
            **fields,
        )

    async def update(
        self,
        id: str,
        *,
        title: str | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
        **fields: Unpack[ItemFields],
    ) -> KnowledgeChange:
        """Change an item's content (one commit); the fields not given (or None) stay.
        Status changes go through ``set_status``."""
        return await self._items.update(
            id, title=title, author=author, message=message, tenant_id=tenant_id, **fields
        )

    async def set_status(
        self,
        id: str,
        status: str | KnowledgeStatus,
        *,
        superseded_by: str | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeChange:
        """Move an item along its lifecycle: draft → proposed | rejected; proposed → accepted
        | rejected; accepted → deprecated | superseded (naming the successor). Anything else
        is INVALID_TRANSITION."""
        return await self._lifecycle.set_status(
            id,
            status,
            superseded_by=superseded_by,
            author=author,
            message=message,
            tenant_id=tenant_id,
        )

    async def commit_change(self, tenant: str, author: str, mutate: Mutation) -> tuple[Plan, str]:
        """Run ``mutate`` on the current head under the tenant's write lock and commit its
        plan; the index follows the commit before the lock is released."""
        return await self._writer.commit_change(tenant, author, mutate)

    async def check_governance(self, tenant: str, item: KnowledgeItem) -> builtins.list[Violation]:
        """Governance of an item about to be written: raises POLICY_VIOLATION on a block and
        returns the violations that do not block (none without a guard)."""
        return await self._writer.check_governance(tenant, item)

    # -- reads of one item (ItemReads) ---------------------------------------------------

    async def get(
        self,
        id: str,
        *,
        history: bool = False,
        tenant_id: str | None = None,
    ) -> KnowledgeItem | KnowledgeRecord:
        """The item as it is at the repository's head; with ``history=True`` a
        KnowledgeRecord with the commits that changed it, newest first."""
        return await self._reads.get(id, history=history, tenant_id=tenant_id)

    async def history(
        self,
        id: str,
        *,
        limit: int = 50,
        tenant_id: str | None = None,
    ) -> builtins.list[HistoryEntry]:
        """The commits that changed the item, newest first."""
        return await self._reads.history(id, limit=limit, tenant_id=tenant_id)

    async def diff(
        self,
        id: str,
        *,
        from_commit: str | None = None,
        to_commit: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeDiff:
        """A unified diff of the item's file between two commits (default: its previous
        version and the head)."""
        return await self._reads.diff(
            id, from_commit=from_commit, to_commit=to_commit, tenant_id=tenant_id
        )

    # -- searches (ItemSearch) -----------------------------------------------------------

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
        return await self._search.list(limit=limit, cursor=cursor, tenant_id=tenant_id, **filters)

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
        return await self._search.search(
            query, limit=limit, mode=mode, min_score=min_score, tenant_id=tenant_id, **filters
        )

    async def items_at(
        self, tenant: str, scopes: Sequence[str], kind: KnowledgeType, *, sync: bool = True
    ) -> builtins.list[KnowledgeItem]:
        """Every accepted item of ``kind`` in the given scopes (``company``, ``team/<id>``…)."""
        return await self._search.items_at(tenant, scopes, kind, sync=sync)

    # -- the repository and its index (Repository) ---------------------------------------

    def tenant(self, tenant_id: str | None) -> str:
        """The tenant a call acts for (promotions and governance ask too)."""
        return self._repository.tenant(tenant_id)

    async def head(self, tenant_id: str | None = None) -> str | None:
        """The commit the tenant's repository is at (None before its first change)."""
        return await self._repository.head(tenant_id)

    async def item_at(self, tenant: str, head: str | None, item_id: str) -> KnowledgeItem:
        """The item at ``head`` (the index is in step with head under the write lock)."""
        return await self._repository.item_at(tenant, head, item_id)

    async def sync(
        self, *, tenant_id: str | None = None, on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        """Bring the search index up to the repository's head (changes since the commit it
        reflects); reads do this on their own when the index is behind. ``on_progress`` is
        told (files read, files in all) as it goes."""
        return await self._repository.sync(tenant_id=tenant_id, on_progress=on_progress)

    async def rebuild(
        self, *, tenant_id: str | None = None, on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        """Rebuild the whole search index from the repository's head (``on_progress`` as
        for ``sync``)."""
        return await self._repository.rebuild(tenant_id=tenant_id, on_progress=on_progress)

    async def policy_version(self, tenant: str, *, sync: bool = True) -> str | None:
        """The last commit that changed a policy (what the merged policies depend on)."""
        return await self._repository.policy_version(tenant, sync=sync)

    async def check(self, *, tenant_id: str | None = None) -> dict[str, Any]:
        """Health of the tenant's repository and of its index."""
        return await self._repository.check(tenant_id=tenant_id)
