"""Conversation neighbourhoods of memories in SQL, for both backends: a message's place in
its conversation, the neighbourhood (the words and vectors of the turns around it) search
scores it with, the locks that keep it consistent, and its renewal when a turn changes
(``Conversations``, a part the writes, deletes, imports and re-embedding hold)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lamina.embeddings.base import Vector
from lamina.memory.ports import NewMemory
from lamina.memory.scoring import neighbourhood_terms, neighbourhood_vector
from lamina.store.sql.memory_rows import MemoryRows
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
class _Turn:
    """A turn of a conversation, as its neighbours see it."""

    id: str
    position: int
    content: str
    conversation: dict[str, Any]
    vector: Vector | None


def _around(thread: ConversationScope, turns: Sequence[_Turn], i: int) -> Neighbourhood:
    """The neighbourhood of ``turns[i]`` among ``turns`` (the turns of ``thread`` in order)."""
    turn = turns[i]
    return neighbourhood_of(
        thread.conversation_id,
        turn.position,
        turn.content,
        turn.conversation,
        turn.vector,
        [(t.content, t.vector) for t in turns[max(i - NEIGHBOURS, 0) : i]],
        [(t.content, t.vector) for t in turns[i + 1 : i + 1 + FOLLOWING]],
    )


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


class Conversations:
    """The neighbourhood work of writes, deletes, imports and re-embedding."""

    def __init__(self, rows: MemoryRows) -> None:
        self._d = rows.dialect
        self.embedder = rows.embedder

    def lock(self, tenant_id: str, conversation_ids: set[str]) -> Program[None]:
        """Hold the ``conversations`` rows (as ``add_messages`` does) before changing turns,
        in one order: no neighbourhood is computed from turns that change meanwhile."""
        for conversation_id in sorted(conversation_ids):
            yield row(
                "SELECT next_position FROM conversations WHERE tenant_id = %s "  # noqa: S608
                f"AND conversation_id = %s{self._d.for_update}",
                tenant_id,
                conversation_id,
            )

    def sized(self, vector: Vector | None) -> Vector | None:
        """``vector`` if it is of the configured model's size (as ``vector_of`` reads it)."""
        return vector if vector is not None and len(vector) == self.embedder.dimensions else None

    def vector_of(self, value: Any, model: str | None) -> Vector | None:
        """A stored vector if it is of the configured model and size, else None (vectors of
        two models never meet)."""
        if value is None or model != self.embedder.model_id:
            return None
        return self.sized(self._d.from_vector(value))

    def renew(self, thread: ConversationScope, after: int, count_: int | None) -> Program[None]:
        """Recompute the neighbourhood of the ``count_`` turns (None: all) of ``thread``
        after position ``after``, and of the ``FOLLOWING`` turns at or before it (whose next
        turns those are), from the turns now around them: after turns were added, deleted
        or rewritten, no neighbour keeps old words or vectors or misses new ones."""
        before, later = yield from self._stored_turns(thread, after, count_)
        turns = [*before, *later]
        last = len(turns) if count_ is None else min(len(before) + count_, len(turns))
        targets = range(max(len(before) - FOLLOWING, 0), last)
        yield from self._write_renewed(thread, turns, [turns[i] for i in targets], targets)

    def _stored_turns(
        self, thread: ConversationScope, after: int, count_: int | None
    ) -> Program[tuple[list[_Turn], list[_Turn]]]:
        """The stored turns of ``thread``: the ``NEIGHBOURS + FOLLOWING`` at or before
        position ``after`` and the ``count_`` (None: all) after it (with the ``FOLLOWING``
        after those), each in order of position, then of storing (turns an import gave one
        position are in one order on both stores)."""
        columns = (
            "SELECT id, conversation_position, content, metadata, embedding, embedding_model "
            "FROM memories WHERE tenant_id = %s AND conversation_id = %s AND layer = %s "
            "AND scope_key = %s AND conversation_position "
        )
        before = yield rows(
            columns + f"<= %s ORDER BY conversation_position DESC, {self._d.seq} DESC LIMIT %s",
            *thread,
            after,
            NEIGHBOURS + FOLLOWING,
        )
        limit = "" if count_ is None else f" LIMIT {int(count_) + FOLLOWING}"
        later = yield rows(
            columns + f"> %s ORDER BY conversation_position, {self._d.seq}{limit}",
            *thread,
            after,
        )
        return [self._turn(t) for t in reversed(before)], [self._turn(t) for t in later]

    def _turn(self, stored: Sequence[Any]) -> _Turn:
        memory_id, position, content, metadata, vector, model = stored
        conversation = self._d.from_json(metadata).get(CONVERSATION, {})
        return _Turn(
            str(memory_id), position, str(content), conversation, self.vector_of(vector, model)
        )

    def _write_renewed(
        self,
        thread: ConversationScope,
        turns: Sequence[_Turn],
        targets: Sequence[_Turn],
        at: Sequence[int],
    ) -> Program[None]:
        """Write the neighbourhoods of the stored ``targets`` (``at``: their places in
        ``turns``, the turns of ``thread`` in order) in one statement."""
        updates = []
        names: list[str] = []
        for turn, i in zip(targets, at, strict=True):
            values = self.neighbourhood_columns(turn.content, _around(thread, turns, i))
            names = list(values)
            updates.append((*values.values(), thread.tenant_id, turn.id))
        if updates:
            yield self._d.update("memories", names, ("tenant_id", "id"), updates)

    def new_turns(
        self, memories: Sequence[NewMemory], vectors: Sequence[Vector | None]
    ) -> Program[list[Neighbourhood | None]]:
        """The neighbourhoods of memories about to be written (an import's batch, an
        ``add_messages`` call; ``vectors``: as they are stored), None for those that are no
        conversation message: from the stored turns around them and from each other. The
        stored turns they become neighbours of are renewed (those ``renew`` renews after a
        thread's first new turn); the memories are written with theirs, instead of written,
        then renewed."""
        threads: dict[ConversationScope, list[tuple[int, int]]] = {}
        for i, m in enumerate(memories):
            place = place_of(m.metadata)
            if place is not None:
                thread = ConversationScope(m.tenant_id, place[0], m.scope.layer.value, m.scope.key)
                threads.setdefault(thread, []).append((i, place[1]))
        out: list[Neighbourhood | None] = [None] * len(memories)
        for thread, mine in sorted(threads.items()):
            before, later = yield from self._stored_turns(thread, min(p for _, p in mine) - 1, None)
            new = [
                _Turn(
                    memories[i].id,
                    position,
                    memories[i].content,
                    memories[i].metadata.get(CONVERSATION, {}),
                    self.sized(vectors[i]),
                )
                for i, position in mine
            ]
            # In order of position; at one position, the stored turns first, then as given.
            merged = [*before, *later, *new]
            fresh = len(before) + len(later)  # where the new turns start in ``merged``
            order = sorted(range(len(merged)), key=lambda k: (merged[k].position, k >= fresh, k))
            turns = [merged[k] for k in order]
            where = {k: n for n, k in enumerate(order)}
            for j, (i, _) in enumerate(mine):
                out[i] = _around(thread, turns, where[fresh + j])
            renewed = range(max(len(before) - FOLLOWING, 0), fresh)
            yield from self._write_renewed(
                thread, turns, [merged[k] for k in renewed], [where[k] for k in renewed]
            )
        return out

    def neighbourhood_columns(self, content: str, n: Neighbourhood | None) -> dict[str, Any]:
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
