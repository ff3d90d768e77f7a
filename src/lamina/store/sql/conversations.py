"""Conversation neighbourhoods of memories in SQL, for both backends: a message's place in
its conversation, the neighbourhood (the words and vectors of the turns around it) search
scores it with, the locks that keep it consistent, and its renewal when a turn changes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lamina.embeddings.base import Vector
from lamina.memory.scoring import neighbourhood_terms, neighbourhood_vector
from lamina.store.sql.memory_rows import SqlMemoryRows
from lamina.store.sql.program import Program, row, rows

#: The metadata key of a conversation message (``lamina.memory.messages``).
CONVERSATION = "conversation"
#: Previous turns in a message's neighbourhood (lamina.memory.scoring).
NEIGHBOURS = 2
#: Following turns in a message's neighbourhood: a reply completes what a turn means (an
#: answer follows its question), so a turn is found through the next turns too.
FOLLOWING = 2


@dataclass(frozen=True, order=True)
class ConversationScope:
    """The turns of one conversation in one scope (layer and scope key): the only turns a
    message's neighbourhood is made of."""

    tenant_id: str
    conversation_id: str
    layer: str
    scope_key: str

    def __iter__(self) -> Iterator[str]:
        return iter((self.tenant_id, self.conversation_id, self.layer, self.scope_key))


@dataclass(frozen=True)
class Neighbourhood:
    conversation_id: str
    position: int
    context: str
    vector: Vector | None


def place_of(metadata: dict[str, Any]) -> tuple[str, int] | None:
    """(conversation id, position) of a conversation message (add_messages), else None."""
    conversation = metadata.get(CONVERSATION)
    if not isinstance(conversation, dict):
        return None
    cid, position = conversation.get("id"), conversation.get("position")
    if isinstance(cid, str) and isinstance(position, int) and not isinstance(position, bool):
        return cid, position
    return None


def neighbourhood_of(
    conversation_id: str,
    position: int,
    content: str,
    conversation: dict[str, Any],
    own: Vector | None,
    previous: Sequence[tuple[str, Vector | None]],
    following: Sequence[tuple[str, Vector | None]] = (),
) -> Neighbourhood:
    """The neighbourhood of a message from the (content, vector) of the ``NEIGHBOURS`` turns
    before it and the ``FOLLOWING`` turns after it (fewer at either end), oldest first."""
    speaker = conversation.get("speaker")
    when = conversation.get("timestamp")
    return Neighbourhood(
        conversation_id,
        position,
        neighbourhood_terms(
            [c for c, _ in previous],
            speaker if isinstance(speaker, str) else None,
            when if isinstance(when, str) else None,
            [c for c, _ in following],
        ),
        neighbourhood_vector(own, [v for _, v in previous], [v for _, v in following]),
    )


class SqlConversations(SqlMemoryRows):
    """The neighbourhood work of writes and deletes."""

    def _previous_turns(
        self, thread: ConversationScope, before: int
    ) -> Program[list[tuple[str, Vector | None]]]:
        """(content, vector) of the ``NEIGHBOURS`` stored turns of ``thread`` before position
        ``before``, oldest first. Only turns of the same scope count: a conversation id
        another user also used never lends that user's words."""
        found = yield rows(
            "SELECT content, embedding, embedding_model FROM memories WHERE tenant_id = %s "
            "AND conversation_id = %s AND layer = %s AND scope_key = %s "
            "AND conversation_position < %s ORDER BY conversation_position DESC LIMIT %s",
            *thread,
            before,
            NEIGHBOURS,
        )
        return [(str(c), self._vector_of(v, m)) for c, v, m in reversed(found)]

    def _lock_conversations(self, tenant_id: str, conversation_ids: set[str]) -> Program[None]:
        """Hold the ``conversations`` rows (as ``add_messages`` does) before changing turns,
        in one order: no neighbourhood is computed from turns that change meanwhile."""
        for conversation_id in sorted(conversation_ids):
            yield row(
                "SELECT next_position FROM conversations WHERE tenant_id = %s "  # noqa: S608
                f"AND conversation_id = %s{self._d.for_update}",
                tenant_id,
                conversation_id,
            )

    def _vector_of(self, value: Any, model: str | None) -> Vector | None:
        """A stored vector if it is of the configured model and size, else None (vectors of
        two models never meet)."""
        if value is None or model != self.embedder.model_id:
            return None
        vector = self._d.from_vector(value)
        return vector if vector is not None and len(vector) == self.embedder.dimensions else None

    def _renew(self, thread: ConversationScope, after: int, count_: int | None) -> Program[None]:
        """Recompute the neighbourhood of the ``count_`` turns (None: all) of ``thread``
        after position ``after``, and of the ``FOLLOWING`` turns at or before it (whose next
        turns those are), from the turns now around them: after turns were added, deleted
        or rewritten, no neighbour keeps old words or vectors or misses new ones."""
        columns = (
            "SELECT id, conversation_position, content, metadata, embedding, embedding_model "
            "FROM memories WHERE tenant_id = %s AND conversation_id = %s AND layer = %s "
            "AND scope_key = %s AND conversation_position "
        )
        before = yield rows(
            columns + "<= %s ORDER BY conversation_position DESC LIMIT %s",
            *thread,
            after,
            NEIGHBOURS + FOLLOWING,
        )
        limit = "" if count_ is None else f" LIMIT {int(count_) + FOLLOWING}"
        later = yield rows(
            columns + f"> %s ORDER BY conversation_position{limit}",
            *thread,
            after,
        )
        turns = [*reversed(before), *later]
        targets = range(
            max(len(before) - FOLLOWING, 0),
            len(turns) if count_ is None else min(len(before) + count_, len(turns)),
        )
        window = [(str(t[2]), self._vector_of(t[4], t[5])) for t in turns]
        tenant_id, conversation_id = thread.tenant_id, thread.conversation_id
        updates = []
        names: list[str] = []
        for i in targets:
            memory_id, position, content, metadata = turns[i][:4]
            conversation = self._d.from_json(metadata).get(CONVERSATION, {})
            n = neighbourhood_of(
                conversation_id,
                position,
                content,
                conversation,
                window[i][1],
                window[max(i - NEIGHBOURS, 0) : i],
                window[i + 1 : i + 1 + FOLLOWING],
            )
            values = self._neighbourhood_columns(content, n)
            names = list(values)
            updates.append((*values.values(), tenant_id, memory_id))
        if updates:
            yield self._d.update("memories", names, ("tenant_id", "id"), updates)

    def _neighbourhood_columns(self, content: str, n: Neighbourhood | None) -> dict[str, Any]:
        """The index columns of a row; a conversation message's also name its place and
        neighbourhood (other rows leave those columns out: stores of an older schema, which
        tests fill, lack them)."""
        if n is None:
            return self._d.memory_terms(content)
        return {
            "conversation_id": n.conversation_id,
            "conversation_position": n.position,
            "context": n.context,
            "context_embedding": None if n.vector is None else self._d.vector(n.vector),
            **self._d.memory_terms(content, n.context),
        }
