"""The context skill: the tools that keep a session's conversation and build the prompt for
the next model call, so an agent behind A2A or MCP gets what the ContextAwareModel gives a
Python caller. Session keys and everything under them belong to the calling tenant."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lamina.runtime import AsyncLamina
from lamina.server.tools.args import Args, IdArgs
from lamina.server.tools.base import Tool
from lamina.shapes import jsonable

SessionKey = Field(min_length=1, max_length=256, description="The conversation's session key.")


class ToolCallArgs(Args):
    name: str = Field(min_length=1)
    id: str | None = Field(default=None, description="The call's id (to pair it with a result).")
    input: Any = None
    output: Any = None


class SessionMessageArgs(Args):
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(description="Stored verbatim (empty only with tool calls).")
    tool_calls: list[ToolCallArgs] | None = None


class SessionAppend(Args):
    session_key: str = SessionKey
    messages: list[SessionMessageArgs] = Field(
        min_length=1, description="Appended in order, in one transaction."
    )


class SessionRead(Args):
    session_key: str = SessionKey
    recent: bool = Field(
        default=False,
        description="Only the un-observed messages, newest kept within "
        "max_message_token_budget (what goes after the system prompt).",
    )
    start: int = Field(default=0, ge=0)
    limit: int | None = Field(default=None, ge=1)


class SessionNotes(Args):
    session_key: str = SessionKey
    limit: int | None = Field(default=None, ge=1, description="The most recent N; default all.")


class SessionSystemPrompt(Args):
    session_key: str = SessionKey
    prompt: str | None = Field(
        default=None,
        description="Replace the session's base system prompt with this text; null or an "
        "empty string clears it; left out: only read it.",
    )


class ContextPrompt(IdArgs):
    query: str = Field(description="The user's latest message (may have no keywords).")
    base: str = Field(
        default="",
        description="The agent's own system instruction; default: the session's base system "
        "prompt (session_system_prompt), when session_key is given and it has one.",
    )
    session_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="With it: the session's reflections, observations and recent messages.",
    )
    layers: list[str] | None = Field(
        default=None,
        description="Context layers (default: user_knowledge, skill_patterns, "
        "external_knowledge, agent_learnings).",
    )


async def session_append(ms: AsyncLamina, a: SessionAppend, t: str) -> Any:
    messages = [m.model_dump(exclude_none=True) for m in a.messages]
    for m in messages:
        m["tool_calls"] = [
            {k: v for k, v in c.items() if k != "id" or v is not None}
            for c in m.get("tool_calls", [])
        ]
    added = await ms.sessions.append_many(a.session_key, messages, tenant_id=t)
    return {"messages": jsonable(added)}


async def session_messages(ms: AsyncLamina, a: SessionRead, t: str) -> Any:
    sessions = ms.sessions
    if a.recent:
        found = await sessions.recent_messages(a.session_key, tenant_id=t)
    else:
        found = await sessions.messages(a.session_key, start=a.start, limit=a.limit, tenant_id=t)
    prompt = await sessions.system_prompt(a.session_key, tenant_id=t)
    return {"messages": jsonable(found), "system_prompt": prompt}


async def session_observations(ms: AsyncLamina, a: SessionNotes, t: str) -> Any:
    notes = await ms.sessions.observations(a.session_key, limit=a.limit, tenant_id=t)
    return {"observations": jsonable(notes)}


async def session_reflections(ms: AsyncLamina, a: SessionNotes, t: str) -> Any:
    notes = await ms.sessions.reflections(a.session_key, limit=a.limit, tenant_id=t)
    return {"reflections": jsonable(notes)}


async def session_system_prompt(ms: AsyncLamina, a: SessionSystemPrompt, t: str) -> Any:
    if "prompt" in a.model_fields_set:
        await ms.sessions.set_system_prompt(a.session_key, a.prompt, tenant_id=t)
    prompt = await ms.sessions.system_prompt(a.session_key, tenant_id=t)
    return {"session_key": a.session_key, "system_prompt": prompt}


async def context_prompt(ms: AsyncLamina, a: ContextPrompt, t: str) -> Any:
    sessions, context = ms.sessions, ms.context
    ids = {k: v for k, v in a.ids().items() if v is not None}
    base = await sessions.base_prompt(a.session_key, a.base, tenant_id=t)
    built = await context.compose_prompt(
        base,
        a.query[: context.settings.max_query_length],
        layers=a.layers,
        session_key=a.session_key or "",
        identifiers=ids,
        tenant_id=t,
    )
    recent = await sessions.recent_messages(a.session_key, tenant_id=t) if a.session_key else []
    # memory_ids: the memories whose text the prompt holds; a stored task is indexed by them,
    # so forgetting one forgets the prompt (lamina.threads.forgetting).
    return {
        "prompt": built.text,
        "messages": jsonable(recent),
        "memory_ids": list(built.memory_ids),
    }


CONTEXT_TOOLS: tuple[Tool[Any], ...] = (
    Tool(
        "session_append",
        "context",
        "Append messages (with tool calls) to a session; observational memory observes "
        "them when their tokens reach the threshold.",
        SessionAppend,
        session_append,
        read_only=False,
    ),
    Tool(
        "session_messages",
        "context",
        "A session's messages, oldest first (or only the recent un-observed ones), and "
        "its base system prompt.",
        SessionRead,
        session_messages,
        read_only=True,
    ),
    Tool(
        "session_observations",
        "context",
        "A session's observations (notes of what was said), oldest first.",
        SessionNotes,
        session_observations,
        read_only=True,
    ),
    Tool(
        "session_reflections",
        "context",
        "A session's reflections (condensed observations), oldest first.",
        SessionNotes,
        session_reflections,
        read_only=True,
    ),
    Tool(
        "session_system_prompt",
        "context",
        "A session's base system prompt (the one the context-aware model keeps and "
        "context_prompt uses when no base is given); with prompt: replace it first "
        "(null or an empty string clears it).",
        SessionSystemPrompt,
        session_system_prompt,
        read_only=False,
    ),
    Tool(
        "context_prompt",
        "context",
        "The system prompt for the next model call: the base instruction (default: the "
        "session's base system prompt) plus the context for the query and, with a session "
        "key, the session's memory; and the recent messages to send after it.",
        ContextPrompt,
        context_prompt,
        read_only=True,
    ),
)
