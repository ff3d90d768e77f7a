"""A session's record: its messages (appended, listed, compacted), its observations and
reflections, and what of them fits the next model call (``recent_*``, within the budgets)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from lamina.checks import check_content, check_int, check_string, invalid, too_long
from lamina.observational.base import (
    ROLES,
    SessionCore,
    check_session_key,
    check_tool_calls,
    said,
)
from lamina.observational.models import Note, SessionMessage, SessionView
from lamina.observational.ports import NewMessage
from lamina.observational.runs import ObserverRuns

#: Messages read at a time by recent_messages, from the end.
RECENT_PAGE = 128


def _limit(limit: int | None) -> int | None:
    """How many (None: all)."""
    return None if limit is None else check_int("limit", limit, minimum=1)


class SessionRecords:
    """Messages, observations and reflections as stored (appending may queue the observer)."""

    def __init__(self, core: SessionCore, runs: ObserverRuns) -> None:
        self._core = core
        self._runs = runs

    async def append(
        self,
        session_key: str,
        role: str,
        content: str,
        *,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        tenant_id: str | None = None,
    ) -> SessionMessage:
        """Append one message; with observational memory on, maybe queue the observer."""
        added = await self.append_many(
            session_key,
            [{"role": role, "content": content, "tool_calls": tool_calls}],
            tenant_id=tenant_id,
        )
        return added[0]

    async def append_many(
        self,
        session_key: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tenant_id: str | None = None,
    ) -> list[SessionMessage]:
        """Append messages ({role, content, tool_calls?}) in one transaction."""
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        new = []
        for m in messages:
            if not isinstance(m, Mapping):
                raise invalid("each message must be an object with role and content")
            role = m.get("role")
            if role not in ROLES:
                raise invalid(f"role must be one of {sorted(ROLES)}", "role")
            content = m.get("content")
            calls = check_tool_calls(m.get("tool_calls"))
            if not isinstance(content, str) or (not content.strip() and not calls):
                raise invalid("content must be a non-empty string", "content")
            if content.strip():
                check_content(content, self._core.max_content)
            text = content + "".join(
                f"\n{c['name']} {c['input']} {c['output']}" for c in said(calls)
            )
            new.append(NewMessage(role, content, self._core.counter.count(text), calls))
        if not new:
            return []
        stored = await self._core.call(
            "append", lambda: self._core.sessions.append_messages(tenant, key, new)
        )
        if self._core.settings.enabled:
            await self._runs.note_tokens((tenant, key), sum(m.token_count for m in stored))
        return [m for m in stored]

    async def messages(
        self,
        session_key: str,
        *,
        start: int = 0,
        limit: int | None = None,
        tenant_id: str | None = None,
    ) -> list[SessionMessage]:
        """The session's messages from index ``start``, at most ``limit`` (None: all)."""
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        check_int("start", start, minimum=0)
        limit = _limit(limit)
        rows = await self._core.call(
            "list messages",
            lambda: self._core.sessions.list_messages(tenant, key, start=start, limit=limit),
        )
        return [m for m in rows]

    async def recent_messages(
        self, session_key: str, *, tenant_id: str | None = None
    ) -> list[SessionMessage]:
        """The un-observed messages, newest kept, within max_message_token_budget: what goes
        to the model after the system prompt. Read from the end, a page at a time, until the
        budget is spent: the cost follows what fits, not the session's length."""
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        budget = self._core.settings.max_message_token_budget
        through, last = await asyncio.gather(
            self._core.call(
                "observed through", lambda: self._core.sessions.observed_through(tenant, key)
            ),
            self._core.call("last index", lambda: self._core.sessions.last_index(tenant, key)),
        )
        kept: list[SessionMessage] = []
        end = last
        while end > through:
            start = max(through + 1, end - RECENT_PAGE + 1)
            rows = await self._page(tenant, key, start, end - start + 1)
            for m in reversed(rows):
                cost = m.token_count + self._core.counter.per_message
                if cost > budget:
                    return [m for m in reversed(kept)]
                kept.append(m)
                budget -= cost
            end = start - 1
        return [m for m in reversed(kept)]

    async def _page(self, tenant: str, key: str, start: int, count: int) -> list[SessionMessage]:
        rows: list[SessionMessage] = await self._core.call(
            "list messages",
            lambda: self._core.sessions.list_messages(tenant, key, start=start, limit=count),
        )
        return rows

    async def delete_messages(
        self, session_key: str, *, start: int = 0, tenant_id: str | None = None
    ) -> int:
        """Delete the session's messages from index ``start`` on (all by default); how many
        were deleted. From 0, its observations, reflections and base system prompt go too:
        nothing of the deleted conversation comes back in a prompt."""
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        check_int("start", start, minimum=0)
        deleted: int = await self._core.call(
            "delete messages", lambda: self._core.sessions.delete_messages(tenant, key, start)
        )
        if start == 0:
            await self._core.call(
                "clear system prompt",
                lambda: self._core.sessions.set_system_prompt(tenant, key, None),
            )
            await self._core.call(
                "delete notes",
                lambda: self._core.sessions.delete_notes(tenant, key, reflections=False),
            )
            await self._core.call(
                "delete notes",
                lambda: self._core.sessions.delete_notes(tenant, key, reflections=True),
            )
        self._core.unobserved.pop((tenant, key), None)
        return deleted

    async def system_prompt(self, session_key: str, *, tenant_id: str | None = None) -> str | None:
        """The session's base system prompt (what the context-aware model keeps for the
        session's later turns); None when it has none."""
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        found: str | None = await self._core.call(
            "system prompt", lambda: self._core.sessions.system_prompt(tenant, key)
        )
        return found

    async def base_prompt(
        self, session_key: str | None, base: str = "", *, tenant_id: str | None = None
    ) -> str:
        """The base system prompt of a call for the session: ``base`` when it has text, else
        the session's kept one (as the context-aware model does), else ``base``. Every door
        that assembles a prompt for a session (the context tool, the CLI, the inspector)
        starts from it."""
        if not isinstance(base, str):
            raise invalid("base must be a string", "base")
        if not session_key or base.strip():
            return base
        kept = await self.system_prompt(session_key, tenant_id=tenant_id)
        return base if kept is None else kept

    async def set_system_prompt(
        self, session_key: str, prompt: str | None, *, tenant_id: str | None = None
    ) -> None:
        """Replace the session's base system prompt; None (or an empty string) clears it."""
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        if prompt is not None and not isinstance(prompt, str):
            raise invalid("prompt must be a string or None", "prompt")
        # Text every store can hold (no NUL, no lone surrogate), as a message's content.
        text = check_string("prompt", prompt) if prompt and prompt.strip() else None
        if text is not None and len(text) > self._core.max_content:
            raise too_long("prompt", len(text), self._core.max_content, length=len(text))
        await self._core.call(
            "set system prompt", lambda: self._core.sessions.set_system_prompt(tenant, key, text)
        )

    async def compact(
        self, session_key: str, up_to_index: int, summary: str, *, tenant_id: str | None = None
    ) -> SessionMessage:
        """Replace messages 0..up_to_index by one system message "[Compacted Summary]\\n…"."""
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        check_int("up_to_index", up_to_index)
        text = check_content(summary, self._core.max_content)
        message: SessionMessage = await self._core.call(
            "compact",
            lambda: self._core.sessions.compact_messages(
                tenant, key, up_to_index, text, self._core.counter.count(text)
            ),
        )
        self._core.unobserved.pop((tenant, key), None)
        return message

    async def list_sessions(
        self, *, after: str | None = None, limit: int | None = None, tenant_id: str | None = None
    ) -> list[tuple[str, int]]:
        """(session key, message count) of the sessions, in key order: those after ``after``,
        at most ``limit`` (None: all)."""
        tenant = self._core.tenant(tenant_id)
        last = None if after is None else check_session_key(after)
        count = None if limit is None else _limit(limit)
        result: list[tuple[str, int]] = await self._core.call(
            "list sessions",
            lambda: self._core.sessions.list_sessions(tenant, after=last, limit=count),
        )
        return result

    async def show(
        self,
        session_key: str,
        *,
        start: int = 0,
        limit: int | None = None,
        tenant_id: str | None = None,
    ) -> SessionView:
        """The session's messages (from index ``start``, at most ``limit``; None: all), its
        observations and reflections, its base system prompt, and its totals (counted in the
        store, not from the page)."""
        messages = await self.messages(session_key, start=start, limit=limit, tenant_id=tenant_id)
        tenant = self._core.tenant(tenant_id)
        key = check_session_key(session_key)
        through = await self._core.call(
            "observed through", lambda: self._core.sessions.observed_through(tenant, key)
        )
        total, tokens, waiting, waiting_tokens = await self._core.call(
            "message totals", lambda: self._core.sessions.message_totals(tenant, key, through)
        )
        observations = await self._notes(tenant, key, reflections=False, limit=None)
        reflections = await self._notes(tenant, key, reflections=True, limit=None)
        prompt = await self._core.call(
            "system prompt", lambda: self._core.sessions.system_prompt(tenant, key)
        )
        return SessionView(
            session_key=key,
            messages=[m for m in messages],
            observations=[n for n in observations],
            reflections=[n for n in reflections],
            observed_through=through,
            unobserved_tokens=waiting_tokens,
            message_count=total,
            message_tokens=tokens,
            unobserved_count=waiting,
            system_prompt=prompt,
        )

    async def _notes(
        self, tenant: str, key: str, *, reflections: bool, limit: int | None
    ) -> list[Note]:
        result: list[Note] = await self._core.call(
            "list notes",
            lambda: self._core.sessions.list_notes(
                tenant, key, reflections=reflections, limit=limit
            ),
        )
        return result

    async def observations(
        self, session_key: str, *, limit: int | None = None, tenant_id: str | None = None
    ) -> list[Note]:
        """The ``limit`` most recent observations (all if None), oldest first."""
        return await self._list_notes(session_key, limit, tenant_id, reflections=False)

    async def reflections(
        self, session_key: str, *, limit: int | None = None, tenant_id: str | None = None
    ) -> list[Note]:
        """The ``limit`` most recent reflections (all if None), oldest first."""
        return await self._list_notes(session_key, limit, tenant_id, reflections=True)

    async def _list_notes(
        self, session_key: str, limit: int | None, tenant_id: str | None, *, reflections: bool
    ) -> list[Note]:
        notes = await self._notes(
            self._core.tenant(tenant_id),
            check_session_key(session_key),
            reflections=reflections,
            limit=_limit(limit),
        )
        return [n for n in notes]

    async def delete_observations(self, session_key: str, *, tenant_id: str | None = None) -> int:
        """Delete the session's observations; how many were deleted."""
        return await self._delete_notes(session_key, tenant_id, reflections=False)

    async def delete_reflections(self, session_key: str, *, tenant_id: str | None = None) -> int:
        """Delete the session's reflections; how many were deleted."""
        return await self._delete_notes(session_key, tenant_id, reflections=True)

    async def _delete_notes(
        self, session_key: str, tenant_id: str | None, *, reflections: bool
    ) -> int:
        tenant, key = self._core.tenant(tenant_id), check_session_key(session_key)
        count: int = await self._core.call(
            "delete reflections" if reflections else "delete observations",
            lambda: self._core.sessions.delete_notes(tenant, key, reflections=reflections),
        )
        self._core.unobserved.pop((tenant, key), None)
        return count

    # The conversation-memory source of the context retriever and prompt assembly.

    async def recent_observations(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        """At most max_observations_in_context (0: unlimited) of the latest, oldest first."""
        cap = self._core.settings.max_observations_in_context
        return await self._recent_notes(session_key, limit, cap, tenant_id, reflections=False)

    async def recent_reflections(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        """At most max_reflections_in_context (0: unlimited) of the latest, oldest first."""
        cap = self._core.settings.max_reflections_in_context
        return await self._recent_notes(session_key, limit, cap, tenant_id, reflections=True)

    async def _recent_notes(
        self, session_key: str, limit: int, cap: int, tenant_id: str | None, *, reflections: bool
    ) -> list[str]:
        n = limit if cap == 0 else min(limit, cap)
        notes = await self._notes(
            self._core.tenant(tenant_id), session_key, reflections=reflections, limit=n
        )
        return [note.content for note in notes]
