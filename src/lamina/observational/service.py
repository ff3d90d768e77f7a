"""``ms.sessions``: session messages and observational memory.

Appending a message counts its tokens; when a session's un-observed message tokens reach
``message_token_threshold`` (and observational memory is enabled) the session is queued for
the background observer. Processing a session, under its lease (one observer per session,
across processes), runs the Observer on the un-observed messages, optionally compacts them,
runs the Reflector when observation tokens reach ``observation_token_threshold``, and a
meta-reflection when reflections reach ``reflection_consolidation_threshold``. Every LLM
failure is logged and leaves the data as it was: the next trigger tries again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from lamina.buffer import BackgroundBuffer
from lamina.config import LLMSettings, ObservationalMemorySettings
from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatModel, request
from lamina.memory.layers import check_tenant
from lamina.memory.validation import check_content
from lamina.observational.graph import parse_extraction
from lamina.observational.models import Note, SessionMessage, SessionView
from lamina.observational.prompts import (
    GRAPH_SYSTEM,
    OBSERVER_SYSTEM,
    REFLECTOR_SYSTEM,
    render_messages,
    render_notes,
)
from lamina.retry import RetryPolicy
from lamina.store.base import MemoryStore
from lamina.store.session_base import NewMessage, StoredMessage, StoredNote
from lamina.tokens import TokenCounter

log = logging.getLogger(__name__)

ROLES = frozenset({"system", "user", "assistant", "tool"})
MAX_SESSION_KEY = 256
Key = tuple[str, str]  # (tenant, session key)


def _invalid(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def check_session_key(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _invalid("session_key must be a non-empty string", field="session_key")
    if len(value) > MAX_SESSION_KEY or "\x00" in value:
        raise _invalid(f"session_key must be at most {MAX_SESSION_KEY} characters, without NUL")
    return value


def _check_tool_calls(calls: object) -> list[dict[str, Any]]:
    if calls is None:
        return []
    if not isinstance(calls, list | tuple):
        raise _invalid("tool_calls must be a list of {name, input, output}", field="tool_calls")
    out = []
    for call in calls:
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise _invalid("each tool call needs a string name", field="tool_calls")
        unknown = set(call) - {"name", "input", "output"}
        if unknown:
            raise _invalid(f"unknown tool call field(s): {sorted(unknown)}", field="tool_calls")
        out.append({"name": call["name"], "input": call.get("input"), "output": call.get("output")})
    return out


def observer_llm_settings(om: ObservationalMemorySettings, primary: LLMSettings) -> LLMSettings:
    """The observer's model: observational_memory.provider/model, else the primary one."""
    if not om.model:
        return primary
    return primary.model_copy(
        update={
            "provider": om.provider or primary.provider,
            "model": om.model,
            "base_url": om.base_url if om.base_url is not None else primary.base_url,
            "api_key_env": om.api_key_env if om.api_key_env is not None else primary.api_key_env,
        }
    )


class SessionService:
    def __init__(
        self,
        store: MemoryStore,
        settings: ObservationalMemorySettings,
        *,
        default_tenant: str,
        counter: TokenCounter,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
        max_content_length: int,
        model_factory: Callable[[], ChatModel] | None = None,
    ) -> None:
        self.settings = settings
        self._store = store
        self._sessions = store.sessions
        self._default_tenant = default_tenant
        self._counter = counter
        self._retry = retry
        self._ready = ready
        self._max_content = max_content_length
        self._model_factory = model_factory
        self._model: ChatModel | None = None
        self._owner = f"lamina-{uuid.uuid4()}"
        self._unobserved: dict[Key, int] = {}
        self.buffer: BackgroundBuffer[Key] = BackgroundBuffer(
            "observation buffer",
            self._process,
            queue_size=settings.queue_size,
            workers=settings.workers,
        )
        #: Feeds graph extraction: (tenant, session, observation id, observation text).
        self.graph_buffer: BackgroundBuffer[tuple[str, str, str, str]] = BackgroundBuffer(
            "graph buffer", self._extract_graph, queue_size=settings.queue_size, workers=1
        )

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self.settings.enabled:
            self._chat_model()  # a configuration problem shows at start, not at the 1st trigger
            self.buffer.start()
            if self.settings.graph:
                self.graph_buffer.start()

    async def close(self) -> None:
        await self.buffer.stop()
        await self.graph_buffer.stop()
        if self._model is not None:
            await self._model.aclose()
            self._model = None

    def _chat_model(self) -> ChatModel:
        if self._model is None:
            if self._model_factory is None:
                raise LaminaError(
                    ErrorCode.CONFIGURATION_ERROR,
                    "observational memory needs a chat model: set observational_memory.model "
                    "or llm.model",
                )
            self._model = self._model_factory()
        return self._model

    def dropped_count(self) -> int:
        return self.buffer.dropped_count()

    def graph_dropped_count(self) -> int:
        return self.graph_buffer.dropped_count()

    @property
    def graph_enabled(self) -> bool:
        return self.settings.enabled and self.settings.graph

    async def flush(self) -> None:
        """Wait until every queued session (and graph extraction) has been processed."""
        await self.buffer.drain()
        await self.graph_buffer.drain()

    def _tenant(self, tenant_id: str | None) -> str:
        return check_tenant(self._default_tenant if tenant_id is None else tenant_id)

    async def _call(self, operation: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        await self._ready()
        return await self._retry.run(operation, fn)

    # -- messages ---------------------------------------------------------------------------

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
        tenant = self._tenant(tenant_id)
        key = check_session_key(session_key)
        new = []
        for m in messages:
            if not isinstance(m, Mapping):
                raise _invalid("each message must be an object with role and content")
            role = m.get("role")
            if role not in ROLES:
                raise _invalid(f"role must be one of {sorted(ROLES)}", field="role")
            content = m.get("content")
            calls = _check_tool_calls(m.get("tool_calls"))
            if not isinstance(content, str) or (not content.strip() and not calls):
                raise _invalid("content must be a non-empty string", field="content")
            if content.strip():
                check_content(content, self._max_content)
            text = content + "".join(f"\n{c['name']} {c['input']} {c['output']}" for c in calls)
            new.append(NewMessage(role, content, self._counter.count(text), calls))
        if not new:
            return []
        stored = await self._call(
            "append", lambda: self._sessions.append_messages(tenant, key, new)
        )
        if self.settings.enabled:
            await self._note_tokens((tenant, key), sum(m.token_count for m in stored))
        return [SessionMessage.of(m) for m in stored]

    async def _note_tokens(self, key: Key, tokens: int) -> None:
        pending = self._unobserved.get(key)
        if pending is None:
            pending = await self._count_unobserved(key)  # first touch in this process
        else:
            pending += tokens
        self._unobserved[key] = pending
        if pending >= self.settings.message_token_threshold:
            self.buffer.trigger(key)

    async def _count_unobserved(self, key: Key) -> int:
        through = await self._sessions.observed_through(*key)
        rest = await self._sessions.list_messages(*key, start=through + 1)
        return sum(m.token_count for m in rest)

    async def messages(
        self,
        session_key: str,
        *,
        start: int = 0,
        limit: int | None = None,
        tenant_id: str | None = None,
    ) -> list[SessionMessage]:
        tenant = self._tenant(tenant_id)
        key = check_session_key(session_key)
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise _invalid("start must be a non-negative integer", field="start")
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise _invalid("limit must be a positive integer", field="limit")
        rows = await self._call(
            "list messages",
            lambda: self._sessions.list_messages(tenant, key, start=start, limit=limit),
        )
        return [SessionMessage.of(m) for m in rows]

    async def recent_messages(
        self, session_key: str, *, tenant_id: str | None = None
    ) -> list[SessionMessage]:
        """The un-observed messages, newest kept, within max_message_token_budget: what goes
        to the model after the system prompt."""
        tenant = self._tenant(tenant_id)
        key = check_session_key(session_key)
        through = await self._call(
            "observed through", lambda: self._sessions.observed_through(tenant, key)
        )
        rows = await self._call(
            "list messages", lambda: self._sessions.list_messages(tenant, key, start=through + 1)
        )
        budget, kept = self.settings.max_message_token_budget, []
        for m in reversed(rows):
            cost = m.token_count + self._counter.per_message
            if cost > budget:
                break
            kept.append(m)
            budget -= cost
        return [SessionMessage.of(m) for m in reversed(kept)]

    async def compact(
        self, session_key: str, up_to_index: int, summary: str, *, tenant_id: str | None = None
    ) -> SessionMessage:
        """Replace messages 0..up_to_index by one system message "[Compacted Summary]\\n…"."""
        tenant = self._tenant(tenant_id)
        key = check_session_key(session_key)
        if isinstance(up_to_index, bool) or not isinstance(up_to_index, int):
            raise _invalid("up_to_index must be an integer", field="up_to_index")
        text = check_content(summary, self._max_content)
        message = await self._call(
            "compact",
            lambda: self._sessions.compact_messages(
                tenant, key, up_to_index, text, self._counter.count(text)
            ),
        )
        self._unobserved.pop((tenant, key), None)
        return SessionMessage.of(message)

    async def list_sessions(self, *, tenant_id: str | None = None) -> list[tuple[str, int]]:
        tenant = self._tenant(tenant_id)
        result: list[tuple[str, int]] = await self._call(
            "list sessions", lambda: self._sessions.list_sessions(tenant)
        )
        return result

    async def show(self, session_key: str, *, tenant_id: str | None = None) -> SessionView:
        tenant = self._tenant(tenant_id)
        key = check_session_key(session_key)
        messages = await self._call(
            "list messages", lambda: self._sessions.list_messages(tenant, key)
        )
        through = await self._call(
            "observed through", lambda: self._sessions.observed_through(tenant, key)
        )
        observations = await self._notes(tenant, key, reflections=False, limit=None)
        reflections = await self._notes(tenant, key, reflections=True, limit=None)
        return SessionView(
            session_key=key,
            messages=[SessionMessage.of(m) for m in messages],
            observations=[Note.of(n) for n in observations],
            reflections=[Note.of(n) for n in reflections],
            observed_through=through,
            unobserved_tokens=sum(m.token_count for m in messages if m.index > through),
        )

    # -- observations and reflections -------------------------------------------------------

    async def _notes(
        self, tenant: str, key: str, *, reflections: bool, limit: int | None
    ) -> list[StoredNote]:
        result: list[StoredNote] = await self._call(
            "list notes",
            lambda: self._sessions.list_notes(tenant, key, reflections=reflections, limit=limit),
        )
        return result

    def _check_limit(self, limit: int | None) -> int | None:
        if limit is None:
            return None
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise _invalid("limit must be a positive integer", field="limit")
        return limit

    async def observations(
        self, session_key: str, *, limit: int | None = None, tenant_id: str | None = None
    ) -> list[Note]:
        """The ``limit`` most recent observations (all if None), oldest first."""
        notes = await self._notes(
            self._tenant(tenant_id),
            check_session_key(session_key),
            reflections=False,
            limit=self._check_limit(limit),
        )
        return [Note.of(n) for n in notes]

    async def reflections(
        self, session_key: str, *, limit: int | None = None, tenant_id: str | None = None
    ) -> list[Note]:
        """The ``limit`` most recent reflections (all if None), oldest first."""
        notes = await self._notes(
            self._tenant(tenant_id),
            check_session_key(session_key),
            reflections=True,
            limit=self._check_limit(limit),
        )
        return [Note.of(n) for n in notes]

    async def delete_observations(self, session_key: str, *, tenant_id: str | None = None) -> int:
        tenant, key = self._tenant(tenant_id), check_session_key(session_key)
        count: int = await self._call(
            "delete observations",
            lambda: self._sessions.delete_notes(tenant, key, reflections=False),
        )
        self._unobserved.pop((tenant, key), None)
        return count

    async def delete_reflections(self, session_key: str, *, tenant_id: str | None = None) -> int:
        tenant, key = self._tenant(tenant_id), check_session_key(session_key)
        count: int = await self._call(
            "delete reflections",
            lambda: self._sessions.delete_notes(tenant, key, reflections=True),
        )
        self._unobserved.pop((tenant, key), None)
        return count

    # The conversation-memory source of the context retriever and prompt assembly.

    async def recent_observations(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        """At most max_observations_in_context (0: unlimited) of the latest, oldest first."""
        cap = self.settings.max_observations_in_context
        n = limit if cap == 0 else min(limit, cap)
        notes = await self._notes(self._tenant(tenant_id), session_key, reflections=False, limit=n)
        return [note.content for note in notes]

    async def recent_reflections(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        """At most max_reflections_in_context (0: unlimited) of the latest, oldest first."""
        cap = self.settings.max_reflections_in_context
        n = limit if cap == 0 else min(limit, cap)
        notes = await self._notes(self._tenant(tenant_id), session_key, reflections=True, limit=n)
        return [note.content for note in notes]

    # -- the observer and the reflector -----------------------------------------------------

    async def observe(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Observe the un-observed messages now, whatever their tokens; None if there were
        none or another process holds the session. LLM failures raise here."""
        key = (self._tenant(tenant_id), check_session_key(session_key))
        await self._ready()
        return await self._leased(key, lambda: self._observe(key, force=True, quiet=False))

    async def reflect(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Condense the session's observations into a reflection now (None if it has none)."""
        key = (self._tenant(tenant_id), check_session_key(session_key))
        await self._ready()
        return await self._leased(key, lambda: self._reflect(key, force=True, quiet=False))

    async def _leased(self, key: Key, work: Callable[[], Awaitable[Note | None]]) -> Note | None:
        owned = await self._retry.run(
            "lease",
            lambda: self._sessions.acquire_lease(*key, self._owner, self.settings.lease_seconds),
        )
        if not owned:
            log.info("session %r is being observed by another process", key[1])
            return None
        try:
            return await work()
        finally:
            try:
                await self._sessions.release_lease(*key, self._owner)
            except LaminaError as exc:  # the lease expires on its own
                log.warning("releasing the lease of session %r failed: %s", key[1], exc)

    async def _process(self, key: Key) -> None:
        """The background unit of work for one session."""

        async def run() -> Note | None:
            await self._observe(key, force=False, quiet=True)
            await self._reflect(key, force=False, quiet=True)
            await self._meta_reflect(key, quiet=True)
            return None

        await self._leased(key, run)
        self._unobserved[key] = await self._count_unobserved(key)

    async def _generate(self, system: str, text: str, what: str, quiet: bool) -> str | None:
        try:
            reply = await self._chat_model().generate(request(("user", text), system=system))
        except LaminaError as exc:
            if not quiet:
                raise
            log.warning("%s failed (kept the raw history; the next trigger retries): %s", what, exc)
            return None
        content = reply.content.strip()
        if not content:
            if not quiet:
                raise LaminaError(
                    ErrorCode.PROVIDER_ERROR, f"the {what} returned nothing", retryable=False
                )
            log.warning("%s returned nothing; the next trigger retries", what)
            return None
        return content

    async def _observe(self, key: Key, *, force: bool, quiet: bool) -> Note | None:
        through = await self._sessions.observed_through(*key)
        pending: list[StoredMessage] = await self._sessions.list_messages(*key, start=through + 1)
        tokens = sum(m.token_count for m in pending)
        if not pending or (not force and tokens < self.settings.message_token_threshold):
            return None
        text = await self._generate(OBSERVER_SYSTEM, render_messages(pending), "observer", quiet)
        if text is None:
            return None
        note = await self._sessions.add_note(
            *key, text, self._counter.count(text), 0, (pending[0].index, pending[-1].index)
        )
        if self.settings.graph and self.graph_buffer.running:
            self.graph_buffer.trigger((*key, note.id, text))
        if self.settings.compact:
            await self._sessions.compact_messages(
                *key, pending[-1].index, text, self._counter.count(text)
            )
        return Note.of(note)

    async def _reflect(self, key: Key, *, force: bool, quiet: bool) -> Note | None:
        """Observations → one reflection of generation 1, when their tokens reach the
        threshold (or ``force``)."""
        observations = await self._sessions.list_notes(*key, reflections=False)
        tokens = sum(n.token_count for n in observations)
        if not observations or (not force and tokens < self.settings.observation_token_threshold):
            return None
        return await self._condense(key, observations, 1, "reflector", quiet)

    async def _meta_reflect(self, key: Key, *, quiet: bool) -> Note | None:
        """Reflections → one of generation max + 1, when there are enough of them."""
        reflections = await self._sessions.list_notes(*key, reflections=True)
        if len(reflections) < self.settings.reflection_consolidation_threshold:
            return None
        generation = max(n.generation for n in reflections) + 1
        return await self._condense(key, reflections, generation, "meta-reflection", quiet)

    async def _condense(
        self, key: Key, notes: list[StoredNote], generation: int, what: str, quiet: bool
    ) -> Note | None:
        text = await self._generate(REFLECTOR_SYSTEM, render_notes(notes), what, quiet)
        if text is None:
            return None
        source = (min(n.source_start for n in notes), max(n.source_end for n in notes))
        note = await self._sessions.add_note(
            *key,
            text,
            self._counter.count(text),
            generation,
            source,
            replaces=[n.id for n in notes],
        )
        return Note.of(note)

    # -- graph memory -----------------------------------------------------------------------

    async def _extract_graph(self, item: tuple[str, str, str, str]) -> None:
        tenant, key, _note_id, text = item
        try:
            reply = await self._chat_model().generate(
                request(("user", text), system=GRAPH_SYSTEM, json_output=True)
            )
            graph = parse_extraction(reply.content)
        except LaminaError as exc:
            log.warning("graph extraction for session %r failed: %s", key, exc)
            return
        await self._retry.run(
            "save graph",
            lambda: self._sessions.add_graph(
                tenant,
                key,
                [(e.name, e.type) for e in graph.entities],
                [(r.source, r.relation, r.target) for r in graph.relations],
            ),
        )

    async def extract_graph(
        self, session_key: str, text: str, *, tenant_id: str | None = None
    ) -> tuple[int, int]:
        """Extract entities and relations from ``text`` now (errors raised); returns the new
        (entities, relations)."""
        tenant, key = self._tenant(tenant_id), check_session_key(session_key)
        body = check_content(text, self._max_content)
        await self._ready()
        reply = await self._chat_model().generate(
            request(("user", body), system=GRAPH_SYSTEM, json_output=True)
        )
        graph = parse_extraction(reply.content)
        result: tuple[int, int] = await self._retry.run(
            "save graph",
            lambda: self._sessions.add_graph(
                tenant,
                key,
                [(e.name, e.type) for e in graph.entities],
                [(r.source, r.relation, r.target) for r in graph.relations],
            ),
        )
        return result

    async def graph_context(
        self, query: str, session_key: str | None = None, *, tenant_id: str | None = None
    ) -> list[str]:
        """Relations near the entities ``query`` names (graph_depth hops, graph_limit lines),
        as "source relation target"; only the session's when a session key is given."""
        tenant = self._tenant(tenant_id)
        if not isinstance(query, str) or not query.strip():
            return []
        rows = await self._call(
            "graph",
            lambda: self._sessions.graph_neighbourhood(
                tenant,
                query,
                session_key=session_key or None,
                depth=self.settings.graph_depth,
                limit=self.settings.graph_limit,
            ),
        )
        return [f"{a} {b} {c}" for a, b, c in rows]
