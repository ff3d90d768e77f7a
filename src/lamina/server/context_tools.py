"""The context skill: the tools that keep a session's conversation and build the prompt for
the next model call, so an agent behind A2A or MCP gets what the ContextAwareModel gives a
Python caller. Session keys and everything under them belong to the calling tenant."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lamina.runtime import AsyncLamina
from lamina.server.memory_args import Args, IdArgs
from lamina.server.memory_tools import Handler
from lamina.server.tools import ServerTool, build_tools
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


def build_context_tools(ms: AsyncLamina) -> list[ServerTool]:
    """The context skill's tools, bound to ``ms``."""
    sessions, context = ms.sessions, ms.context

    async def session_append(a: Any, t: str) -> Any:
        messages = [m.model_dump(exclude_none=True) for m in a.messages]
        for m in messages:
            m["tool_calls"] = [
                {k: v for k, v in c.items() if k != "id" or v is not None}
                for c in m.get("tool_calls", [])
            ]
        added = await sessions.append_many(a.session_key, messages, tenant_id=t)
        return {"messages": jsonable(added)}

    async def session_messages(a: Any, t: str) -> Any:
        if a.recent:
            found = await sessions.recent_messages(a.session_key, tenant_id=t)
        else:
            found = await sessions.messages(
                a.session_key, start=a.start, limit=a.limit, tenant_id=t
            )
        prompt = await sessions.system_prompt(a.session_key, tenant_id=t)
        return {"messages": jsonable(found), "system_prompt": prompt}

    async def session_observations(a: Any, t: str) -> Any:
        notes = await sessions.observations(a.session_key, limit=a.limit, tenant_id=t)
        return {"observations": jsonable(notes)}

    async def session_reflections(a: Any, t: str) -> Any:
        notes = await sessions.reflections(a.session_key, limit=a.limit, tenant_id=t)
        return {"reflections": jsonable(notes)}

    async def session_system_prompt(a: Any, t: str) -> Any:
        if "prompt" in a.model_fields_set:
            await sessions.set_system_prompt(a.session_key, a.prompt, tenant_id=t)
        prompt = await sessions.system_prompt(a.session_key, tenant_id=t)
        return {"session_key": a.session_key, "system_prompt": prompt}

    async def context_prompt(a: Any, t: str) -> Any:
        ids = {k: v for k, v in a.ids().items() if v is not None}
        base = await sessions.base_prompt(a.session_key, a.base, tenant_id=t)
        prompt = await context.build_prompt(
            base,
            a.query[: context.settings.max_query_length],
            layers=a.layers,
            session_key=a.session_key or "",
            identifiers=ids,
            tenant_id=t,
        )
        recent = await sessions.recent_messages(a.session_key, tenant_id=t) if a.session_key else []
        return {"prompt": prompt, "messages": jsonable(recent)}

    spec: list[tuple[str, str, type[Args], Handler, bool]] = [
        (
            "session_append",
            "Append messages (with tool calls) to a session; observational memory observes "
            "them when their tokens reach the threshold.",
            SessionAppend,
            session_append,
            False,
        ),
        (
            "session_messages",
            "A session's messages, oldest first (or only the recent un-observed ones), and "
            "its base system prompt.",
            SessionRead,
            session_messages,
            True,
        ),
        (
            "session_observations",
            "A session's observations (notes of what was said), oldest first.",
            SessionNotes,
            session_observations,
            True,
        ),
        (
            "session_reflections",
            "A session's reflections (condensed observations), oldest first.",
            SessionNotes,
            session_reflections,
            True,
        ),
        (
            "session_system_prompt",
            "A session's base system prompt (the one the context-aware model keeps and "
            "context_prompt uses when no base is given); with prompt: replace it first "
            "(null or an empty string clears it).",
            SessionSystemPrompt,
            session_system_prompt,
            False,
        ),
        (
            "context_prompt",
            "The system prompt for the next model call: the base instruction (default: the "
            "session's base system prompt) plus the context for the query and, with a session "
            "key, the session's memory; and the recent messages to send after it.",
            ContextPrompt,
            context_prompt,
            True,
        ),
    ]
    return [ServerTool(n, "context", d, m, h, r) for n, d, m, h, r in spec]


def all_tools(ms: AsyncLamina) -> list[ServerTool]:
    """Every tool the servers expose: memory, knowledge, governance and context."""
    return [*build_tools(ms), *build_context_tools(ms)]
