"""What the Observer and the Reflector are asked (and how messages are shown to them)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from lamina.observational.base import said
from lamina.observational.models import Note, SessionMessage

OBSERVER_SYSTEM = """You compress a conversation between a user and an AI assistant into one \
observation note for the assistant's long-term memory.

Capture, in 2 to 5 sentences of plain prose:
- decisions that were made;
- the user's intent and goals;
- important facts and context (names, numbers, dates, preferences, constraints);
- task progress and outcomes (what was done, what worked, what failed, what is pending).

Each message starts with the time it was sent (UTC). Keep the "when" of what matters: say \
when things happened or were decided ("On 2026-03-14 the user ...") rather than "today". \
Never copy tool output verbatim and leave out redundant detail, greetings and filler. Write \
in the third person ("The user ...", "The assistant ..."). Reply with the note only."""

REFLECTOR_SYSTEM = """You condense observation notes about one conversation into a single \
reflection for an AI assistant's long-term memory.

Write 3 to 8 sentences of plain prose that keep every decision, goal, important fact and \
outcome, merge repetitions, and resolve contradictions in favour of the later note. Reply \
with the reflection only."""


def _clip(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _when(at: datetime) -> str:
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M")


def render_messages(messages: Sequence[SessionMessage], *, max_tokens: int | None = None) -> str:
    """One line per message ``[time] [role]: content`` (time in UTC); tool calls as
    ``  [tool:name] input`` and ``  [result] output`` (clipped: the observer is told not to
    copy them; ``kept`` ones are left out). A message of more than ``max_tokens`` tokens is
    clipped to about that many."""
    lines = []
    for m in messages:
        calls = said(m.tool_calls)
        if not m.content.strip() and not calls:
            continue  # an item a framework adapter keeps, with nothing said
        content = m.content
        if max_tokens is not None and m.token_count > max_tokens:
            content = _clip(content, max(1, len(content) * max_tokens // m.token_count))
        lines.append(f"[{_when(m.created_at)}] [{m.role}]: {content}")
        for call in calls:
            if call.get("input") is not None:
                lines.append(f"  [tool:{call.get('name', '?')}] {_clip(str(call['input']))}")
            if call.get("output") is not None:
                lines.append(f"  [result] {_clip(str(call.get('output')), 500)}")
    return "\n".join(lines)


def render_notes(notes: Sequence[Note]) -> str:
    """``Observation N:`` blocks, or ``Reflection N (gen G):`` blocks."""
    blocks = []
    for n, note in enumerate(notes, 1):
        head = (
            f"Observation {n}:"
            if note.generation == 0
            else (f"Reflection {n} (gen {note.generation}):")
        )
        blocks.append(f"{head}\n{note.content}")
    return "\n\n".join(blocks)


GRAPH_SYSTEM = """You extract a small knowledge graph from a note about a conversation.

Reply with one JSON object only, of this shape:
{"entities": [{"name": "...", "type": "person|project|system|place|organisation|concept|other"}],
 "relations": [{"source": "...", "relation": "...", "target": "..."}]}

Entities are the specific people, projects, systems, places, organisations and concepts the
note names. Relations connect two of those entities with a short verb phrase (e.g. "works on",
"depends on", "prefers"). At most 20 entities and 30 relations. No other text."""
