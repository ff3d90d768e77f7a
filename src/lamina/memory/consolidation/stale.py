"""Superseded messages: when consolidation rewrites (UPDATE) or invalidates (DELETE) a
fact, the messages that fact was extracted from say something no longer true ("I live in
Berlin" once "Alice moved to Lisbon"). They stay stored and unchanged, but their
metadata gains ``superseded`` ({"at": ISO time, "fact": the replaced fact's id}), in
consolidation's one transaction, and a search about the present ranks them down
(lamina.memory.scoring.STALE_SHARE); with ``include_invalid`` or a time range they rank
as before (docs/search.md, "Superseded messages").

A message that is also the source of a fact this consolidation writes is not marked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from lamina.memory.consolidation.steps import Step
from lamina.memory.models import FactEvent, MemoryEntry
from lamina.memory.ports import Invalidation, MemoryReadStore, Revision
from lamina.memory.scoring import SUPERSEDED_KEY

#: The metadata key linking a fact to the messages it was extracted from.
SOURCES_KEY = "inferred_from"


def _sources(entry: MemoryEntry) -> list[str]:
    """The message ids a stored fact names in its metadata (none for a fact added by hand)."""
    found = entry.metadata.get(SOURCES_KEY)
    messages = found.get("messages") if isinstance(found, dict) else None
    return [m for m in messages if isinstance(m, str)] if isinstance(messages, list) else []


def replaced(
    steps: Iterable[Step], invalidated: Sequence[Invalidation]
) -> list[tuple[MemoryEntry, datetime]]:
    """(stored fact, when it stopped holding) for each fact the steps rewrite or
    invalidate."""
    out: list[tuple[MemoryEntry, datetime]] = []
    for step in steps:
        seen = {c.entry.id: c.entry for c in step.fact.candidates}
        event = step.decision.event
        if event is FactEvent.UPDATE:
            out.append((seen[step.decision.targets[0]], step.fact.event_at))
        elif event is FactEvent.DELETE:
            for index in step.invalidated:
                inv = invalidated[index]
                out.append((seen[inv.memory_id], inv.at))
    return out


async def superseded(
    reads: MemoryReadStore,
    tenant_id: str,
    steps: Sequence[Step],
    invalidated: Sequence[Invalidation],
) -> list[Revision]:
    """The metadata patches marking the messages of the facts ``steps`` replace, each
    checked against the message's ``updated_at`` as read here (a message changed before
    the write makes it a CONFLICT, and the decisions are taken again); messages deleted or
    expired meanwhile are skipped."""
    current = {
        source
        for step in steps
        if step.decision.event is not FactEvent.NOOP
        for source in step.fact.sources
    }
    marks: dict[str, dict[str, Any]] = {}
    for fact, at in replaced(steps, invalidated):
        for message in _sources(fact):
            if message not in current:
                marks[message] = {"at": at.isoformat(), "fact": fact.id}
    out = []
    for message, mark in marks.items():
        entry = await reads.get(tenant_id, message)
        if entry is not None:
            out.append(Revision(message, entry.updated_at, None, None, {SUPERSEDED_KEY: mark}))
    return out
