"""``ms.sessions``: session messages and observational memory.

Appending a message counts its tokens; when a session's un-observed message tokens reach
``message_token_threshold`` (and observational memory is enabled) the session is queued for
the background observer. Processing a session, under its lease (one observer per session,
across processes), runs the Observer on the un-observed messages, optionally compacts them,
runs the Reflector when observation tokens reach ``observation_token_threshold``, and a
meta-reflection when reflections reach ``reflection_consolidation_threshold``. Every LLM
failure is logged and leaves the data as it was: the next trigger tries again.

The service holds its parts and hands each call to one: what they share (``SessionCore``:
the store, settings, counter, retries, un-observed counts), the session records
(``SessionRecords``: messages, observations, reflections, prompts) and the observer runs
(``ObserverRuns``: observer, reflector, graph extraction, their buffers and chat model).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from lamina.buffer import BackgroundBuffer
from lamina.config import ObservationalMemorySettings
from lamina.llm.base import ChatModel
from lamina.observational.base import Key, SessionCore
from lamina.observational.messages import SessionRecords
from lamina.observational.models import Note, SessionMessage, SessionView
from lamina.observational.ports import SessionStore
from lamina.observational.runs import ObserverRuns, observer_llm_settings
from lamina.retry import RetryPolicy
from lamina.tokens import TokenCounter

__all__ = ["SessionService", "observer_llm_settings"]


class SessionService:
    """``ms.sessions``: the session records and the observer runs, each call handed to the
    part that holds it."""

    def __init__(
        self,
        sessions: SessionStore,
        settings: ObservationalMemorySettings,
        *,
        default_tenant: str,
        counter: TokenCounter,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
        max_content_length: int,
        model_factory: Callable[[], ChatModel] | None = None,
    ) -> None:
        self._core = SessionCore(
            sessions,
            settings,
            default_tenant=default_tenant,
            counter=counter,
            retry=retry,
            ready=ready,
            max_content_length=max_content_length,
        )
        self._runs = ObserverRuns(self._core, model_factory)
        self._records = SessionRecords(self._core, self._runs)

    @property
    def settings(self) -> ObservationalMemorySettings:
        """observational_memory's settings (what every part reads)."""
        return self._core.settings

    @settings.setter
    def settings(self, value: ObservationalMemorySettings) -> None:
        self._core.settings = value

    @property
    def buffer(self) -> BackgroundBuffer[Key]:
        """Sessions queued for the observer."""
        return self._runs.buffer

    @property
    def graph_buffer(self) -> BackgroundBuffer[tuple[str, str, str, str]]:
        """Feeds graph extraction: (tenant, session, observation id, observation text)."""
        return self._runs.graph_buffer

    @property
    def graph_enabled(self) -> bool:
        """Graph memory is on (observational memory and its graph enabled)."""
        return self._runs.graph_enabled

    # -- the session's record (SessionRecords) -------------------------------------------

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
        return await self._records.append(
            session_key, role, content, tool_calls=tool_calls, tenant_id=tenant_id
        )

    async def append_many(
        self,
        session_key: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tenant_id: str | None = None,
    ) -> list[SessionMessage]:
        """Append messages ({role, content, tool_calls?}) in one transaction."""
        return await self._records.append_many(session_key, messages, tenant_id=tenant_id)

    async def messages(
        self,
        session_key: str,
        *,
        start: int = 0,
        limit: int | None = None,
        tenant_id: str | None = None,
    ) -> list[SessionMessage]:
        """The session's messages from index ``start``, at most ``limit`` (None: all)."""
        return await self._records.messages(
            session_key, start=start, limit=limit, tenant_id=tenant_id
        )

    async def recent_messages(
        self, session_key: str, *, tenant_id: str | None = None
    ) -> list[SessionMessage]:
        """The un-observed messages, newest kept, within max_message_token_budget: what goes
        to the model after the system prompt. Read from the end, a page at a time, until the
        budget is spent: the cost follows what fits, not the session's length."""
        return await self._records.recent_messages(session_key, tenant_id=tenant_id)

    async def delete_messages(
        self, session_key: str, *, start: int = 0, tenant_id: str | None = None
    ) -> int:
        """Delete the session's messages from index ``start`` on (all by default); how many
        were deleted. From 0, its observations, reflections and base system prompt go too:
        nothing of the deleted conversation comes back in a prompt."""
        return await self._records.delete_messages(session_key, start=start, tenant_id=tenant_id)

    async def system_prompt(self, session_key: str, *, tenant_id: str | None = None) -> str | None:
        """The session's base system prompt (what the context-aware model keeps for the
        session's later turns); None when it has none."""
        return await self._records.system_prompt(session_key, tenant_id=tenant_id)

    async def base_prompt(
        self, session_key: str | None, base: str = "", *, tenant_id: str | None = None
    ) -> str:
        """The base system prompt of a call for the session: ``base`` when it has text, else
        the session's kept one (as the context-aware model does), else ``base``. Every door
        that assembles a prompt for a session (the context tool, the CLI, the inspector)
        starts from it."""
        return await self._records.base_prompt(session_key, base, tenant_id=tenant_id)

    async def set_system_prompt(
        self, session_key: str, prompt: str | None, *, tenant_id: str | None = None
    ) -> None:
        """Replace the session's base system prompt; None (or an empty string) clears it."""
        await self._records.set_system_prompt(session_key, prompt, tenant_id=tenant_id)

    async def compact(
        self, session_key: str, up_to_index: int, summary: str, *, tenant_id: str | None = None
    ) -> SessionMessage:
        """Replace messages 0..up_to_index by one system message "[Compacted Summary]\\n…"."""
        return await self._records.compact(session_key, up_to_index, summary, tenant_id=tenant_id)

    async def list_sessions(
        self, *, after: str | None = None, limit: int | None = None, tenant_id: str | None = None
    ) -> list[tuple[str, int]]:
        """(session key, message count) of the sessions, in key order: those after ``after``,
        at most ``limit`` (None: all)."""
        return await self._records.list_sessions(after=after, limit=limit, tenant_id=tenant_id)

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
        return await self._records.show(session_key, start=start, limit=limit, tenant_id=tenant_id)

    async def observations(
        self, session_key: str, *, limit: int | None = None, tenant_id: str | None = None
    ) -> list[Note]:
        """The ``limit`` most recent observations (all if None), oldest first."""
        return await self._records.observations(session_key, limit=limit, tenant_id=tenant_id)

    async def reflections(
        self, session_key: str, *, limit: int | None = None, tenant_id: str | None = None
    ) -> list[Note]:
        """The ``limit`` most recent reflections (all if None), oldest first."""
        return await self._records.reflections(session_key, limit=limit, tenant_id=tenant_id)

    async def delete_observations(self, session_key: str, *, tenant_id: str | None = None) -> int:
        """Delete the session's observations; how many were deleted."""
        return await self._records.delete_observations(session_key, tenant_id=tenant_id)

    async def delete_reflections(self, session_key: str, *, tenant_id: str | None = None) -> int:
        """Delete the session's reflections; how many were deleted."""
        return await self._records.delete_reflections(session_key, tenant_id=tenant_id)

    async def recent_observations(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        """At most max_observations_in_context (0: unlimited) of the latest, oldest first."""
        return await self._records.recent_observations(session_key, limit, tenant_id=tenant_id)

    async def recent_reflections(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        """At most max_reflections_in_context (0: unlimited) of the latest, oldest first."""
        return await self._records.recent_reflections(session_key, limit, tenant_id=tenant_id)

    # -- the observer runs (ObserverRuns) -------------------------------------------------

    async def start(self) -> None:
        """Start the observer's buffers (observational memory on); a configuration problem
        (no chat model) shows here, not at the first trigger."""
        await self._runs.start()

    async def close(self) -> None:
        """Stop the buffers and close the observer's chat model."""
        await self._runs.close()

    def dropped_count(self) -> int:
        """Sessions the observer's queue dropped (full)."""
        return self._runs.dropped_count()

    def graph_dropped_count(self) -> int:
        """Observations the graph extraction's queue dropped (full)."""
        return self._runs.graph_dropped_count()

    async def flush(self) -> None:
        """Wait until every queued session (and graph extraction) has been processed."""
        await self._runs.flush()

    async def observe(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Observe the un-observed messages now, whatever their tokens; None if there were
        none or another process holds the session. LLM failures raise here."""
        return await self._runs.observe(session_key, tenant_id=tenant_id)

    async def reflect(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Condense the session's observations into a reflection now (None if it has none)."""
        return await self._runs.reflect(session_key, tenant_id=tenant_id)

    async def meta_reflect(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Consolidate the session's reflections into one of the next generation now,
        whatever reflection_consolidation_threshold says (None with fewer than two)."""
        return await self._runs.meta_reflect(session_key, tenant_id=tenant_id)

    async def extract_graph(
        self, session_key: str, text: str, *, tenant_id: str | None = None
    ) -> tuple[int, int]:
        """Extract entities and relations from ``text`` now (errors raised); returns the new
        (entities, relations)."""
        return await self._runs.extract_graph(session_key, text, tenant_id=tenant_id)

    async def graph_context(
        self, query: str, session_key: str | None = None, *, tenant_id: str | None = None
    ) -> list[str]:
        """Relations near the entities ``query`` names (graph_depth hops, graph_limit lines),
        as "source relation target"; only the session's when a session key is given."""
        return await self._runs.graph_context(query, session_key, tenant_id=tenant_id)
