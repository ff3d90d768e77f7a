"""The augmented system prompt: the base prompt, then one markdown section per kind of context.

Order: Runtime Context, Available Tools, User Knowledge, Known Solutions, Available Skills,
External References, Relevant Memories (semantic search of the memory store), Knowledge
Graph (relations near the entities the query names), then Conversation Memory
(reflections before observations) under a token budget. Sections are separated by a blank
line; a section without items is left out, and with nothing at all the base prompt comes
back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

from lamina.context.models import ContextItem, ContextLayer, RetrievalResult
from lamina.tokens import TokenCounter, default_counter

#: What a prompt is assembled from: a retrieval's result, items by layer, or items.
Retrieved: TypeAlias = (
    RetrievalResult | Mapping[ContextLayer, Sequence[ContextItem]] | Iterable[ContextItem]
)

_TITLES = (
    (ContextLayer.RUNTIME_CONTEXT, "Runtime Context"),
    (ContextLayer.TOOL_REGISTRY, "Available Tools"),
    (ContextLayer.USER_KNOWLEDGE, "User Knowledge"),
    (ContextLayer.AGENT_LEARNINGS, "Known Solutions"),
    (ContextLayer.SKILL_PATTERNS, "Available Skills"),
    (ContextLayer.EXTERNAL_KNOWLEDGE, "External References"),
)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def format_item(item: ContextItem) -> str:
    """One item as the line its section shows."""
    f = item.fields
    layer = item.layer
    if layer is ContextLayer.TOOL_REGISTRY:
        return f"- **{f.get('name', item.key)}**: {_one_line(f.get('description', ''))}"
    if layer is ContextLayer.USER_KNOWLEDGE:
        return f"- [{item.category}] {item.key}: {_one_line(item.content)}"
    if layer is ContextLayer.AGENT_LEARNINGS:
        trigger = _one_line(f.get("trigger", item.key))
        fix = _one_line(f.get("fix", ""))
        return f"- When '{trigger}' occurs: {fix}" if fix else f"- When '{trigger}' occurs"
    if layer is ContextLayer.SKILL_PATTERNS:
        return f"- {f.get('name', item.key)}: {_one_line(f.get('description', ''))}"
    if layer is ContextLayer.EXTERNAL_KNOWLEDGE:
        summary = _one_line(f.get("summary", ""))
        head = f"- {f.get('name', item.key)} ({f.get('location', '')})"
        return f"{head}: {summary}" if summary else head
    return f"- {_one_line(item.content)}"


def _by_layer(
    retrieved: Retrieved,
) -> dict[ContextLayer, list[ContextItem]]:
    if isinstance(retrieved, RetrievalResult):
        return {k: list(v) for k, v in retrieved.items.items()}
    if isinstance(retrieved, Mapping):
        return {ContextLayer.parse(k): list(v) for k, v in retrieved.items()}
    out: dict[ContextLayer, list[ContextItem]] = {}
    for item in retrieved:
        out.setdefault(item.layer, []).append(item)
    return out


def memories_section(memories: Iterable[str]) -> str:
    """ "## Relevant Memories", a memory a line (its whitespace collapsed); "" without any."""
    lines = [m for m in (_one_line(x) for x in memories) if m]
    if not lines:
        return ""
    return "## Relevant Memories\n" + "\n".join(f"- {m}" for m in lines)


def pack_memories(
    memories: Sequence[str], limit: int, budget: int | None, counter: TokenCounter
) -> list[int]:
    """The indexes of the ``memories`` (best first) the Relevant Memories section shows: at
    most ``limit``, and with a ``budget`` the section (heading included) within it. A memory
    that does not fit is passed over for the next that does; the first memory with text is
    always shown, whatever its length, so a relevant memory never leaves the section
    empty."""
    kept: list[int] = []
    shown: list[str] = []
    for index, text in enumerate(memories):
        if len(kept) >= limit:
            break
        if not _one_line(text) or (
            budget is not None
            and shown
            and counter.count(memories_section([*shown, text])) > budget
        ):
            continue
        kept.append(index)
        shown.append(text)
    return kept


def memory_section(
    reflections: Sequence[str],
    observations: Sequence[str],
    budget: int,
    counter: TokenCounter,
) -> str:
    """ "## Conversation Memory" within ``budget`` tokens (the whole section, headings
    included). Both lists are oldest first. Reflections first, the newest that fit;
    observations fill what is left, newest first, and stop at the first that does not fit
    (the oldest are the ones dropped); none at all if a reflection had to be left out. What
    is kept is shown oldest first."""

    def render(refl: list[str], obs: list[str]) -> str:
        parts = ["## Conversation Memory"]
        if refl:
            parts.append("### Summary\n" + "\n\n".join(reversed(refl)))
        if obs:
            parts.append("### Recent Observations\n" + "\n".join(f"- {o}" for o in reversed(obs)))
        return "\n\n".join(parts)

    # Items are taken newest first (the kept lists are newest first until rendered), by
    # their own token counts (plus the separator); near the edge the rendered section is
    # counted exactly, and at the end trimmed (oldest first) if the counter is not additive.
    used = counter.count(render(["x"], ["x"]))
    kept_refl: list[str] = []
    all_fit = True
    for text in (r.strip() for r in reversed(reflections)):
        if not text:
            continue
        cost = counter.count(text) + 1
        if used + cost > budget:
            exact = counter.count(render([*kept_refl, text], []))
            if exact > budget:
                all_fit = False
                break
            cost = exact - used
        kept_refl.append(text)
        used += cost
    kept_obs: list[str] = []
    if all_fit:
        for text in (_one_line(o) for o in reversed(observations)):
            if not text:
                continue
            cost = counter.count(text) + 2
            if used + cost > budget:
                exact = counter.count(render(kept_refl, [*kept_obs, text]))
                if exact > budget:
                    break
                cost = exact - used
            kept_obs.append(text)
            used += cost
    while (kept_refl or kept_obs) and counter.count(render(kept_refl, kept_obs)) > budget:
        (kept_obs or kept_refl).pop()
    if not kept_refl and not kept_obs:
        return ""
    return render(kept_refl, kept_obs)


def assemble_prompt(
    base: str,
    retrieved: Retrieved = (),
    reflections: Sequence[str] = (),
    observations: Sequence[str] = (),
    *,
    memories: Sequence[str] = (),
    graph: Sequence[str] = (),
    token_budget: int = 4000,
    counter: TokenCounter | None = None,
) -> str:
    """``base`` plus the sections for what was retrieved; ``base`` unchanged if nothing was.

    ``memories`` are texts from a semantic search of the memory store (the "Relevant
    Memories" section); ``token_budget`` bounds the Conversation Memory section.
    """
    layers = _by_layer(retrieved)
    sections = []
    for layer, title in _TITLES:
        items = layers.get(layer) or []
        if items:
            sections.append(f"## {title}\n" + "\n".join(format_item(i) for i in items))
    rag = memories_section(memories)
    if rag:
        sections.append(rag)
    facts = [g for g in (_one_line(x) for x in graph) if g]
    if facts:
        sections.append("## Knowledge Graph\n" + "\n".join(f"- {g}" for g in facts))
    memory = memory_section(reflections, observations, token_budget, counter or default_counter())
    if memory:
        sections.append(memory)
    if not sections:
        return base
    head = base.rstrip()
    return "\n\n".join([head, *sections]) if head else "\n\n".join(sections)
