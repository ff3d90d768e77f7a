"""The tenant's knowledge repository and the search index that follows it: reads of an item
at the head, and the sync that brings the index up to the head (incrementally from the commit
it reflects, or rebuilt in full)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.knowledge.document import FrontMatterError, is_item_path, parse
from lamina.knowledge.gitstore import GitStore
from lamina.knowledge.index import KnowledgeIndex
from lamina.knowledge.models import KnowledgeItem
from lamina.memory.core import ServiceCore
from lamina.memory.models import SearchMode

logger = logging.getLogger("lamina.knowledge")

#: Told (files done, files in all) as a sync or rebuild reads the repository.
OnProgress = Callable[[int, int | None], None]


def _item_id(path: str) -> str:
    return path.rsplit("/", 1)[1][:-3]


class Repository(ServiceCore):
    """Git (the source of truth) and the index, under one lock per tenant: the state every
    part of the knowledge service shares (the write path, item writes, transitions, reads,
    searches, promotions), with the limits of its calls."""

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
        super().__init__(default_tenant=default_tenant, ready=ready)
        self.git = git
        self.index = index
        #: The limits of the calls: content and query lengths, page size; the default mode.
        self.max_content = max_content_length
        self.max_query = max_query_length
        self.max_limit = max_limit
        self.search_mode = search_mode
        self._locks: dict[str, asyncio.Lock] = {}
        self._synced: dict[str, str] = {}
        self._policy_versions: dict[str, tuple[str | None, Any]] = {}

    def tenant(self, tenant_id: str | None) -> str:
        """The tenant a call acts for (promotions and governance ask too)."""
        return self._tenant(tenant_id)

    async def ready(self) -> None:
        """Wait for the start-up (the store opened and migrated)."""
        await self._ready()

    def lock(self, tenant: str) -> asyncio.Lock:
        """The tenant's write lock in this process (git's lock file spans processes)."""
        return self._locks.setdefault(tenant, asyncio.Lock())

    def mark_synced(self, tenant: str, commit: str) -> None:
        """The index reflects ``commit`` (a write updated it under the tenant's lock)."""
        self._synced[tenant] = commit

    async def head(self, tenant_id: str | None = None) -> str | None:
        """The commit the tenant's repository is at (None before its first change)."""
        tenant = self.tenant(tenant_id)
        return await asyncio.to_thread(self.git.head, tenant)

    async def read(self, tenant: str, path: str, commit: str) -> bytes | None:
        """The file ``path`` of the tenant's repository at ``commit``, read off the event
        loop (None: no such file there; an unknown commit raises as ``GitStore.read``)."""
        return await asyncio.to_thread(self.git.read, tenant, path, commit)

    async def item_at(self, tenant: str, head: str | None, item_id: str) -> KnowledgeItem:
        """The item at ``head`` (the index is in step with head under the write lock)."""
        found = await self.index.lookup(tenant, item_id)
        if found is None or head is None:
            raise self._not_found(tenant, item_id)
        data = await self.read(tenant, found.path, head)
        if data is None:
            raise self._not_found(tenant, item_id)
        return parse(found.path, data, head)

    @staticmethod
    def _not_found(tenant: str, item_id: str) -> LaminaError:
        return LaminaError(
            ErrorCode.ITEM_NOT_FOUND,
            f"no knowledge item {item_id!r} in tenant {tenant!r}",
            details={"id": item_id},
        )

    # -- the index follows the head ---------------------------------------------------------

    async def ensure_synced(self, tenant: str) -> str | None:
        """The repository's head, the index brought up to it first when it is behind."""
        await self._ready()
        head = await asyncio.to_thread(self.git.head, tenant)
        if head is None or self._synced.get(tenant) == head:
            return head
        async with self.lock(tenant):
            return await self.catch_up(tenant)

    async def catch_up(self, tenant: str) -> str | None:
        """The repository's head, the index brought up to it (the tenant's lock held)."""
        head = await asyncio.to_thread(self.git.head, tenant)
        if head is not None and self._synced.get(tenant) != head:
            await self._sync_to(tenant, head)
        return head

    async def _sync_to(
        self, tenant: str, head: str, *, full: bool = False, on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        state = await self.index.state(tenant)
        indexed = None if full or state is None else state.get("commit")
        if indexed == head:
            self._synced[tenant] = head
            return {"commit": head, "indexed": 0, "removed": 0, "full": False}
        invalid: dict[str, dict[str, Any]] = {
            e["path"]: e for e in (state or {}).get("invalid", []) if not full
        }
        changed: dict[str, str | None]
        if indexed is not None:
            try:
                changed = await asyncio.to_thread(self.git.changes, tenant, indexed, head)
            except LaminaError:
                indexed = None  # the indexed commit is gone (history rewritten): rebuild
        if indexed is None:
            changed = dict(await asyncio.to_thread(self.git.files, tenant, head))
        items: list[KnowledgeItem] = []
        removed: list[str] = []
        paths = [path for path in changed if is_item_path(path)]
        for done, path in enumerate(paths, 1):
            blob = changed[path]
            if on_progress is not None:
                on_progress(done, len(paths))
            invalid.pop(path, None)
            if blob is None:
                removed.append(_item_id(path))
                continue
            data = await asyncio.to_thread(self.git.blob, tenant, blob)
            try:
                items.append(parse(path, data, head))
            except FrontMatterError as exc:
                logger.warning("knowledge file skipped by the index: %s", exc.message)
                invalid[path] = {"path": path, **exc.details, "message": exc.message}
                removed.append(_item_id(path))
        if indexed is None:
            present = {i.id for i in items}
            removed = sorted((await self.index.all_ids(tenant)) - present)
        for item_id in removed:
            await self.index.remove(tenant, item_id)
        await self.index.put(tenant, items)
        policies_changed = indexed is None or any("/policies/" in p for p in changed)
        await self.index.set_state(
            tenant,
            {
                **(state or {}),
                "commit": head,
                "invalid": sorted(invalid.values(), key=lambda e: e["path"]),
                "policies": head if policies_changed else (state or {}).get("policies"),
            },
        )
        self._synced[tenant] = head
        logger.info(
            "knowledge index of %s at %s: %d indexed, %d removed%s",
            tenant,
            head[:12],
            len(items),
            len(removed),
            " (full rebuild)" if indexed is None else "",
        )
        return {
            "commit": head,
            "indexed": len(items),
            "removed": len(removed),
            "full": indexed is None,
        }

    async def sync(
        self, *, tenant_id: str | None = None, on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        """Bring the search index up to the repository's head (changes since the commit it
        reflects); reads do this on their own when the index is behind. ``on_progress`` is
        told (files read, files in all) as it goes."""
        return await self._follow_head(tenant_id, full=False, on_progress=on_progress)

    async def rebuild(
        self, *, tenant_id: str | None = None, on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        """Rebuild the whole search index from the repository's head (``on_progress`` as
        for ``sync``)."""
        return await self._follow_head(tenant_id, full=True, on_progress=on_progress)

    async def _follow_head(
        self, tenant_id: str | None, *, full: bool, on_progress: OnProgress | None
    ) -> dict[str, Any]:
        """The index brought to the head under the tenant's lock: the changes since the
        commit it reflects, or (``full``) every file; an empty repository leaves nothing
        (``full``: what the index held is removed)."""
        tenant = self.tenant(tenant_id)
        await self._ready()
        async with self.lock(tenant):
            head = await asyncio.to_thread(self.git.head, tenant)
            if head is None:
                if full:
                    for item_id in await self.index.all_ids(tenant):
                        await self.index.remove(tenant, item_id)
                return {"commit": None, "indexed": 0, "removed": 0, "full": full}
            return await self._sync_to(tenant, head, full=full, on_progress=on_progress)

    async def policy_version(self, tenant: str, *, sync: bool = True) -> str | None:
        """The last commit that changed a policy (what the merged policies depend on)."""
        head = await self.ensure_synced(tenant) if sync else self._synced.get(tenant)
        cached = self._policy_versions.get(tenant)
        if cached is not None and cached[0] == head:
            return str(cached[1]) if cached[1] is not None else None
        state = await self.index.state(tenant) or {}
        version = state.get("policies")
        self._policy_versions[tenant] = (state.get("commit"), version)
        return version if isinstance(version, str) else None

    async def check(self, *, tenant_id: str | None = None) -> dict[str, Any]:
        """Health of the tenant's repository and of its index."""
        tenant = self.tenant(tenant_id)
        repo = await asyncio.to_thread(self.git.check, tenant)
        state = await self.index.state(tenant)
        if repo["status"] == "missing" and state is None:
            repo["status"] = "empty"  # nothing written yet: not a failure
        repo["indexed_commit"] = None if state is None else state.get("commit")
        repo["invalid_files"] = [] if state is None else state.get("invalid", [])
        repo["healthy"] = repo["status"] in ("ok", "empty")
        return repo
