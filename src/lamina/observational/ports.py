"""The sessions port: what observational memory needs stored, and its records.

A session is an ordered list of messages, indexed 0..n-1. Observations cover a range of
message indexes; reflections condense observations (generation 1) or reflections (higher
generations) and keep the range they cover. A lease names the one process observing a
session at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypedDict, Unpack

from lamina.observational.models import Note, SessionMessage
from lamina.text import words


@dataclass(frozen=True)
class NewMessage:
    role: str
    content: str
    token_count: int
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    created_at: datetime | None = None


@dataclass(frozen=True)
class NewNote:
    """An observation (generation 0) or a reflection (1, 2, ...) of the messages from index
    ``source[0]`` to ``source[1]``."""

    content: str
    token_count: int
    generation: int
    source: tuple[int, int]


@dataclass(frozen=True)
class NewGraph:
    """Entities (name, type) and relations (source, relation, target) to upsert."""

    entities: Sequence[tuple[str, str]]
    relations: Sequence[tuple[str, str, str]]


class GraphReach(TypedDict):
    """How far ``graph_neighbourhood`` looks: one session's relations (None: all), hops,
    relations."""

    session_key: str | None
    depth: int
    limit: int


class SessionStore(Protocol):
    async def append_messages(
        self, tenant_id: str, session_key: str, messages: Sequence[NewMessage]
    ) -> list[SessionMessage]:
        """Append in order; indexes continue from the last message."""
        ...

    async def list_messages(
        self, tenant_id: str, session_key: str, *, start: int = 0, limit: int | None = None
    ) -> list[SessionMessage]: ...

    async def last_index(self, tenant_id: str, session_key: str) -> int:
        """The index of the session's last message; -1 when it has none."""
        ...

    async def delete_messages(self, tenant_id: str, session_key: str, start: int) -> int:
        """Delete the session's messages from index ``start`` on; how many were deleted."""
        ...

    async def system_prompt(self, tenant_id: str, session_key: str) -> str | None:
        """The session's base system prompt; None when it has none."""
        ...

    async def set_system_prompt(
        self, tenant_id: str, session_key: str, content: str | None
    ) -> None:
        """Replace the session's base system prompt; None deletes it."""
        ...

    async def compact_messages(
        self, tenant_id: str, session_key: str, up_to_index: int, summary: str, tokens: int
    ) -> SessionMessage:
        """Atomically: delete messages 0..up_to_index, insert the system message
        "[Compacted Summary]\\n<summary>" at index 0 dated before the remaining messages,
        renumber the rest from 1, and move the source ranges of observations and
        reflections with them (ranges inside the compacted part become 0..0). An index
        past the last message is INVALID_ARGUMENT."""
        ...

    async def add_note(
        self, tenant_id: str, session_key: str, note: NewNote, *, replaces: Sequence[str] = ()
    ) -> Note:
        """Store an observation (generation 0) or reflection; delete the notes ``replaces``
        names in the same transaction."""
        ...

    async def list_notes(
        self, tenant_id: str, session_key: str, *, reflections: bool, limit: int | None = None
    ) -> list[Note]:
        """The ``limit`` most recent observations or reflections (all if None), oldest
        first."""
        ...

    async def delete_notes(self, tenant_id: str, session_key: str, *, reflections: bool) -> int:
        """Delete a session's observations or reflections; 0 when it has none."""
        ...

    async def observed_through(self, tenant_id: str, session_key: str) -> int:
        """The highest message index any observation or reflection covers; -1 if none."""
        ...

    async def acquire_lease(
        self, tenant_id: str, session_key: str, owner: str, seconds: float
    ) -> bool:
        """Take the session's lease for ``owner`` unless another owner holds a live one."""
        ...

    async def release_lease(self, tenant_id: str, session_key: str, owner: str) -> None: ...

    async def list_sessions(
        self, tenant_id: str, *, after: str | None = None, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """(session key, message count) of the tenant's sessions in key order: those after
        ``after``, at most ``limit`` (None: all)."""
        ...

    async def message_totals(
        self, tenant_id: str, session_key: str, observed_through: int
    ) -> tuple[int, int, int, int]:
        """The session's message count and tokens, and the count and tokens of its messages
        after index ``observed_through`` (waiting for the observer)."""
        ...

    async def add_graph(self, tenant_id: str, session_key: str, graph: NewGraph) -> tuple[int, int]:
        """Upsert the entities and relations: names are matched case- and space-insensitively,
        endpoints created when unknown; returns the new (entities, relations)."""
        ...

    async def graph_neighbourhood(
        self, tenant_id: str, text: str, **reach: Unpack[GraphReach]
    ) -> list[tuple[str, str, str]]:
        """Relations (source, relation, target) within ``depth`` hops of the entities whose
        name occurs in ``text`` (as whole words, any case), nearest first; only the
        session's relations when ``session_key`` is set."""
        ...


def normalise_entity(name: str) -> str:
    """Lower-case words, punctuation dropped: how entity names and queries are matched."""
    return " ".join(words(name))
