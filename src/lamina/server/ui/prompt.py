"""Prompt preview: the system prompt ``ms.context.build_prompt`` assembles for identifiers, a
session and a query — what the agent would be told — section by section with token counts,
what the conversation-memory budget dropped, and the recent messages sent after it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.server.ui import forms
from lamina.server.ui.base import Inspector, Viewer

#: The section titles context/prompt.py writes, in its order.
TITLES = (
    "Runtime Context",
    "Available Tools",
    "User Knowledge",
    "Known Solutions",
    "Available Skills",
    "External References",
    "Relevant Memories",
    "Knowledge Graph",
    "Conversation Memory",
)
_SPLIT = re.compile(r"\n\n(?=## (?:" + "|".join(map(re.escape, TITLES)) + r")\n)")
DEFAULT_BASE = "You are a helpful assistant."


@dataclass(frozen=True)
class Section:
    title: str
    text: str
    tokens: int


def sections(prompt: str, base: str, count: Any) -> list[Section]:
    """The prompt cut into the base prompt and its ``## Title`` sections."""
    head = base.rstrip()
    rest = prompt[len(head) :] if head and prompt.startswith(head) else prompt
    out = [Section("Base prompt", head, count(head))] if head else []
    for chunk in _SPLIT.split(rest.lstrip("\n")):
        if not chunk:
            continue
        title = chunk.split("\n", 1)[0].removeprefix("## ").strip()
        out.append(Section(title, chunk, count(chunk)))
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def preview(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    params = viewer.params
    ids = forms.identifiers(params)
    ids.pop("session_id", None)
    session = params.get("session_key")
    query = params.get("q")
    asked = "base" in request.query_params
    # As every door: the base given, else the session's kept one, else the page's default.
    base = await ui.ms.sessions.base_prompt(
        session, params.raw("base") if asked else "", tenant_id=viewer.tenant
    ) or ("" if asked else DEFAULT_BASE)
    context: dict[str, Any] = {
        "section": "prompt",
        "ids": ids,
        "session_key": session,
        "query": query,
        "base": base,
        "result": None,
    }
    if not query:
        return ui.render(viewer, "prompt.html", **context)
    ms, tenant = ui.ms, viewer.tenant
    count = ms.counter.count
    prompt = await ms.context.build_prompt(
        base, query, session_key=session, identifiers=ids, tenant_id=tenant
    )
    parts = sections(prompt, base, count)
    memory = next((s.text for s in parts if s.title == "Conversation Memory"), "")
    dropped: dict[str, list[dict[str, Any]]] = {"reflections": [], "observations": []}
    offered: dict[str, int] = {"reflections": 0, "observations": 0}
    stored: dict[str, int] = {"reflections": 0, "observations": 0}
    messages = []
    if session:
        notes = {
            "reflections": await ms.sessions.recent_reflections(session, 1000, tenant_id=tenant),
            "observations": await ms.sessions.recent_observations(session, 1000, tenant_id=tenant),
        }
        stored = {
            "reflections": len(await ms.sessions.reflections(session, tenant_id=tenant)),
            "observations": len(await ms.sessions.observations(session, tenant_id=tenant)),
        }
        for kind, texts in notes.items():
            offered[kind] = len(texts)
            for text in texts:
                shown = text.strip() if kind == "reflections" else _one_line(text)
                if shown and shown not in memory:
                    dropped[kind].append({"text": text, "tokens": count(text)})
        messages = await ms.sessions.recent_messages(session, tenant_id=tenant)
    context["result"] = {
        "prompt": prompt,
        "sections": parts,
        "total": count(prompt),
        "budget": ms.context.memory_token_budget,
        "dropped": dropped,
        "offered": offered,
        "stored": stored,
        "messages": messages,
        "message_tokens": sum(m.token_count for m in messages),
    }
    return ui.render(viewer, "prompt.html", **context)


def routes(ui: Inspector) -> list[Route]:
    return [ui.route("/prompt", preview)]
