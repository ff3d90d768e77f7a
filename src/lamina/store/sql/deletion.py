"""Deleting and forgetting memories in SQL, for both backends: the rows go, their history
keeps no text or metadata, the cache drops vectors no memory needs, the conversation
neighbours of a deleted turn are renewed, and the A2A tasks that held its text are rewritten
(lamina.store.sql.task_forgetting). ``Deletion`` is that program, a part the writes
(delete by id) and the forgetting repository (forgetting.py) hold."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from lamina.store.sql.conversations import NEIGHBOURS, Conversations, ConversationScope, place_of
from lamina.store.sql.embedding_cache import EmbeddingCache
from lamina.store.sql.memory_rows import MemoryRows
from lamina.store.sql.program import Program, count, many, rows
from lamina.store.sql.task_forgetting import forget_in_tasks, forgetting_lock
from lamina.store.sql.timing import HISTORY

#: What a backend does once deleted rows are committed, given how many rows went (SQLite:
#: empty its write-ahead log of their text; PostgreSQL: nothing).
Settle = Callable[[int], Awaitable[None]]


async def nothing_to_settle(deleted: int) -> None:
    """A backend with nothing to do after a delete."""


class Deletion:
    """The delete of memories by id, as a program, and what the backend does once it is
    committed (``settle``)."""

    def __init__(
        self,
        rows: MemoryRows,
        conversations: Conversations,
        cache: EmbeddingCache,
        settle: Settle,
    ) -> None:
        self._d = rows.dialect
        self._conversations = conversations
        self._cache = cache
        #: Called with how many rows a committed delete removed.
        self.settle = settle

    def delete(self, tenant_id: str, memory_ids: list[str], actor: str | None) -> Program[int]:
        d = self._d
        now = d.time(datetime.now(UTC))
        ids = list(dict.fromkeys(memory_ids))
        if ids:
            yield forgetting_lock(tenant_id)  # before any other lock (task_forgetting)
        removed = 0
        for chunk, params in d.any_of_chunks("id", ids):
            going = yield rows(
                f"SELECT metadata FROM memories WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                tenant_id,
                *params,
            )
            talks = {p[0] for r in going if (p := place_of(d.from_json(r[0]))) is not None}
            yield from self._conversations.lock(tenant_id, talks)
            deleted = yield rows(
                f"DELETE FROM memories WHERE tenant_id = %s AND {chunk} "  # noqa: S608
                "RETURNING id, layer, content, metadata, scope_key",
                tenant_id,
                *params,
            )
            places = set()
            for r in deleted:
                place = place_of(d.from_json(r[3]))
                if place is not None:
                    places.add((ConversationScope(tenant_id, place[0], r[1], r[4]), place[1]))
            for thread, position in sorted(places):
                yield from self._conversations.renew(thread, position, NEIGHBOURS)
            if deleted:
                gone = [str(r[0]) for r in deleted]
                yield from self._forget(gone, tenant_id, [r[2] for r in deleted])
                yield from forget_in_tasks(d, tenant_id, memories=gone)
                yield many(
                    HISTORY,
                    [
                        (tenant_id, r[0], "delete", r[1], None, None, None, None, actor, now)
                        for r in deleted
                    ],
                )
            removed += len(deleted)
        return removed

    def _forget(self, memory_ids: list[str], tenant_id: str, contents: list[str]) -> Program[None]:
        """Forget deleted memories: their history keeps what happened, when and by whom but
        no text or metadata, and the embedding cache drops the vectors of every text they
        ever held that no memory of the tenant still holds."""
        chunk, params = self._d.any_of("memory_id", memory_ids)
        held = yield rows(
            "SELECT old_content, new_content FROM memory_history "  # noqa: S608
            f"WHERE tenant_id = %s AND {chunk}",
            tenant_id,
            *params,
        )
        yield count(
            "UPDATE memory_history SET old_content = NULL, new_content = NULL, "  # noqa: S608
            f"old_metadata = NULL, new_metadata = NULL WHERE tenant_id = %s AND {chunk}",
            tenant_id,
            *params,
        )
        texts = set(contents) | {t for r in held for t in r if t is not None}
        yield from self._cache.drop_vectors(tenant_id, texts)
