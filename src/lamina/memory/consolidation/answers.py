"""The chat model's answers, read leniently where that is safe and refused otherwise.

Extraction: fenced or wrapped JSON, a bare list, facts as strings or objects, and the
complete facts of an answer cut short are all accepted (the messages are stored verbatim
whatever is extracted, so a fact missed loses nothing). Sources that are not message
numbers are ignored. An answer without a list of facts is PROVIDER_ERROR (retried).

Decisions: only ids shown to the model count. An UPDATE of an unknown id, or a DELETE none
of whose ids is known, becomes an ADD; a NOOP of an unknown id names no memory; a fact
without a (valid) decision is added. A stored memory is changed at most once per call: a
second UPDATE or DELETE of it becomes an ADD. An answer without a list of decisions is
PROVIDER_ERROR (retried); nothing is written until every answer is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.llm.answers import parse_json, salvage_items
from lamina.memory.models import FactEvent

#: The longest fact kept (characters); longer ones are not facts.
MAX_FACT = 2_000
_EVENTS = {
    "add": FactEvent.ADD,
    "update": FactEvent.UPDATE,
    "delete": FactEvent.DELETE,
    "noop": FactEvent.NOOP,
    "none": FactEvent.NOOP,
    "no_op": FactEvent.NOOP,
}


@dataclass(frozen=True)
class Fact:
    """A fact and the numbers of the messages (of its batch) it comes from (empty: all)."""

    text: str
    sources: tuple[int, ...] = ()


@dataclass(frozen=True)
class Decision:
    """What to do with fact ``fact``: ``targets`` are stored memory ids (resolved)."""

    fact: int
    event: FactEvent
    targets: tuple[str, ...] = ()
    text: str | None = None


@dataclass
class Claims:
    """Stored memories already changed by a decision of this call (each changes once)."""

    taken: set[str] = field(default_factory=set)


def malformed(what: str, raw: str) -> LaminaError:
    return LaminaError(
        ErrorCode.PROVIDER_ERROR,
        f"the chat model's {what} answer is not what was asked for: {raw[:200]!r}",
        retryable=True,
        details={"answer": raw[:500]},
    )


def _list_under(raw: str, key: str, *, one: bool = False) -> list[Any] | None:
    """The list under ``key`` (or the answer itself when it is a list); the complete items
    of a cut-short answer (``one``: a string stands for a list of one); None when there is
    no list."""
    try:
        found: Any = parse_json(raw)
    except ValueError:
        found = None
    if isinstance(found, list):
        return found
    if isinstance(found, dict) and isinstance(found.get(key), list):
        return list(found[key])
    salvaged = salvage_items(raw, key)
    if salvaged:
        return salvaged
    if one and isinstance(found, dict) and isinstance(found.get(key), str):
        return [found[key]]  # one fact given as a string
    return None


def _text(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text if 0 < len(text) <= MAX_FACT else None


def parse_facts(raw: str, messages: int) -> list[Fact]:
    """The facts of an extraction answer about ``messages`` messages (numbered from 0)."""
    items = _list_under(raw, "facts", one=True)
    if items is None:
        if raw.strip() in ("[]", "{}"):
            return []
        raise malformed("extraction", raw)
    out: list[Fact] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Mapping):
            text = _text(item.get("text", item.get("fact")))
            raw_sources = item.get("sources", item.get("source", []))
        else:
            text, raw_sources = _text(item), []
        if text is None or text.casefold() in seen:
            continue
        seen.add(text.casefold())
        if not isinstance(raw_sources, list):
            raw_sources = [raw_sources]
        sources = tuple(
            sorted(
                {
                    int(s)
                    for s in raw_sources
                    if isinstance(s, int) and not isinstance(s, bool) and 0 <= s < messages
                }
            )
        )
        out.append(Fact(text, sources))
    return out


def _refs(value: object) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return [str(v).strip() for v in values if isinstance(v, str | int) and not isinstance(v, bool)]


def _fact_number(value: object, facts: int) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < facts:
        return value
    return None


def parse_decisions(
    raw: str, facts: int, shown: Mapping[str, str], claims: Claims
) -> list[Decision]:
    """One decision per fact (``facts`` facts, numbered from 0), in fact order. ``shown``
    maps the short ids shown to the model (and the real ids) to real memory ids."""
    items = _list_under(raw, "decisions")
    if items is None:
        raise malformed("decision", raw)
    chosen: dict[int, Decision] = {}
    for item in items:
        if not isinstance(item, Mapping):
            continue
        number = _fact_number(item.get("fact"), facts)
        if number is None or number in chosen:
            continue
        event = _EVENTS.get(str(item.get("event", "")).strip().lower())
        if event is None:
            continue
        targets = tuple(
            dict.fromkeys(shown[r] for r in _refs(item.get("id", item.get("ids"))) if r in shown)
        )
        chosen[number] = _checked(number, event, targets, _text(item.get("text")), claims)
    return [chosen.get(i, Decision(i, FactEvent.ADD)) for i in range(facts)]


def _checked(
    number: int, event: FactEvent, targets: tuple[str, ...], text: str | None, claims: Claims
) -> Decision:
    if event is FactEvent.NOOP:
        return Decision(number, event, targets[:1])
    if event is FactEvent.ADD:
        return Decision(number, event)
    free = tuple(t for t in targets if t not in claims.taken)
    if event is FactEvent.UPDATE:
        free = free[:1]
    if not free:
        return Decision(number, FactEvent.ADD)
    claims.taken.update(free)
    return Decision(number, event, free, text if event is FactEvent.UPDATE else None)


def sources_of(fact: Fact, message_ids: Sequence[str]) -> list[str]:
    """The ids of the messages a fact comes from (all of its batch when it names none)."""
    if not fact.sources:
        return list(message_ids)
    return [message_ids[i] for i in fact.sources if i < len(message_ids)]
