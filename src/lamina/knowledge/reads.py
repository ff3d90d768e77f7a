"""Reading one item as it is at the head and as it was: ``get``, ``history`` and ``diff``
(git answers; the index only says where the item lives)."""

from __future__ import annotations

import asyncio
import difflib

from lamina.checks import check_limit
from lamina.errors import ErrorCode, LaminaError
from lamina.knowledge.document import FrontMatterError, check_id, parse
from lamina.knowledge.fields import check_commit
from lamina.knowledge.models import HistoryEntry, KnowledgeDiff, KnowledgeItem, KnowledgeRecord
from lamina.knowledge.repository import Repository


class ItemReads:
    """``get``, ``history`` and ``diff``."""

    def __init__(self, repository: Repository) -> None:
        self._repository = repository

    async def get(
        self,
        id: str,
        *,
        history: bool = False,
        tenant_id: str | None = None,
    ) -> KnowledgeItem | KnowledgeRecord:
        """The item as it is at the repository's head; with ``history=True`` a
        KnowledgeRecord with the commits that changed it, newest first."""
        tenant = self._repository.tenant(tenant_id)
        item_id = check_id("id", id)
        head = await self._repository.ensure_synced(tenant)
        item = await self._repository.item_at(tenant, head, item_id)
        if not history:
            return item
        return KnowledgeRecord(item=item, history=await self._history(tenant, item.path, 100))

    async def history(
        self,
        id: str,
        *,
        limit: int = 50,
        tenant_id: str | None = None,
    ) -> list[HistoryEntry]:
        """The commits that changed the item, newest first."""
        tenant = self._repository.tenant(tenant_id)
        item_id = check_id("id", id)
        size = check_limit(limit, default=50, maximum=self._repository.max_limit)
        head = await self._repository.ensure_synced(tenant)
        item = await self._repository.item_at(tenant, head, item_id)
        return await self._history(tenant, item.path, size)

    async def _history(self, tenant: str, path: str, limit: int) -> list[HistoryEntry]:
        log = await asyncio.to_thread(self._repository.git.log, tenant, path, limit=limit)
        out = []
        for entry in log:
            status = None
            if entry.blob is not None:
                data = await asyncio.to_thread(self._repository.git.blob, tenant, entry.blob)
                try:
                    status = parse(path, data).status
                except FrontMatterError:
                    status = None
            out.append(
                HistoryEntry(
                    commit=entry.sha,
                    author=entry.author,
                    message=entry.message,
                    timestamp=entry.timestamp,
                    status=status,
                    deleted=entry.blob is None,
                )
            )
        return out

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
        tenant = self._repository.tenant(tenant_id)
        item_id = check_id("id", id)
        head = await self._repository.ensure_synced(tenant)
        item = await self._repository.item_at(tenant, head, item_id)
        commits = [e.commit for e in await self._history(tenant, item.path, 2)]
        new = check_commit("to_commit", to_commit) if to_commit else head
        old = (
            check_commit("from_commit", from_commit)
            if from_commit
            else (commits[1] if len(commits) > 1 and new == head else None)
        )
        assert new is not None
        after = await self._read_at(tenant, item.path, new)
        before = b"" if old is None else await self._read_at(tenant, item.path, old)
        lines = difflib.unified_diff(
            before.decode().splitlines(keepends=True),
            after.decode().splitlines(keepends=True),
            fromfile=f"a/{item.path}" if old else "/dev/null",
            tofile=f"b/{item.path}",
        )
        return KnowledgeDiff(
            id=item_id, path=item.path, from_commit=old, to_commit=new, diff="".join(lines)
        )

    async def _read_at(self, tenant: str, path: str, commit: str) -> bytes:
        try:
            data = await self._repository.read(tenant, path, commit)
        except LaminaError as exc:
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"commit {commit} is not in the repository",
                details={"commit": commit},
            ) from exc
        return data or b""
