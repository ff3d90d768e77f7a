"""What consolidation asks the chat model: extract facts from messages, then decide what to
do with each fact given the nearest stored memories. Prompts are bounded (batches.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Characters of a stored memory shown to the model (display only: nothing is cut in store).
SHOWN_CHARACTERS = 1_000

EXTRACT_SYSTEM = """You extract durable facts from a conversation for a long-term memory.

A fact is one short, self-contained statement in the third person that names who it is
about (never "I" or "you"): preferences, plans, relationships, biography, decisions,
events with their dates. Leave out greetings, small talk and anything only the
conversation itself needs. Resolve relative dates ("yesterday") against the message time.

Answer with a JSON object and nothing else:
{"facts": [{"text": "Alice moved to Lisbon in May 2023", "sources": [0, 2]}]}
"sources" lists the numbers of the messages the fact comes from. Answer {"facts": []}
when there is nothing worth remembering."""

DECIDE_SYSTEM = """You keep a long-term memory consistent. For each new fact, compare it
with the stored memories shown and choose one event:

- "ADD": the fact is new information.
- "UPDATE": a stored memory is about the same thing and the fact adds to it or refines
  it; give its "id" and the merged "text" that replaces it.
- "DELETE": the fact contradicts stored memories (they are no longer true); give their
  "id" (or a list of ids). They are marked as no longer valid and the fact is stored.
- "NOOP": a stored memory already says the same; give its "id".

Use only ids shown. Answer with a JSON object and nothing else, one decision per fact:
{"decisions": [{"fact": 0, "event": "UPDATE", "id": "2", "text": "..."}]}"""


@dataclass(frozen=True)
class Said:
    """One message (or piece of a long one) as the extraction prompt shows it."""

    number: int
    speaker: str
    timestamp: str
    content: str


def render_messages(said: Sequence[Said]) -> str:
    lines = [f"[{s.number}] {s.speaker} ({s.timestamp}): {s.content}" for s in said]
    return "Conversation:\n" + "\n".join(lines)


def shown(content: str) -> str:
    text = " ".join(content.split())
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 1] + "…"


def render_decision(facts: Sequence[str], memories: Sequence[tuple[str, str]]) -> str:
    """``memories``: (short id, content) of the stored memories nearest to the facts."""
    stored = "\n".join(f"[{ref}] {shown(text)}" for ref, text in memories) or "(none)"
    new = "\n".join(f"({i}) {shown(fact)}" for i, fact in enumerate(facts))
    return f"Stored memories:\n{stored}\n\nNew facts:\n{new}"
