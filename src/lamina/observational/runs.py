"""The observer, the reflector and graph extraction: background runs queued when a
session's un-observed tokens reach the threshold, and the same runs on demand. A session is
processed under its lease (one observer per session, across processes); an LLM failure in the
background is logged and leaves the data as it was, for the next trigger."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from functools import cached_property

from lamina.buffer import BackgroundBuffer
from lamina.checks import check_content
from lamina.config import LLMSettings, ObservationalMemorySettings
from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatModel, request
from lamina.observational.base import Key, SessionCore, check_session_key
from lamina.observational.graph import GraphExtraction, parse_extraction
from lamina.observational.models import Note, SessionMessage
from lamina.observational.ports import NewGraph, NewNote
from lamina.observational.prompts import (
    GRAPH_SYSTEM,
    OBSERVER_SYSTEM,
    REFLECTOR_SYSTEM,
    render_messages,
    render_notes,
)
from lamina.tokens import batches

log = logging.getLogger("lamina.observational.service")

#: Refusals of one message before the observer records it as it is.
MAX_MESSAGE_FAILURES = 3


def _refused(exc: LaminaError) -> bool:
    """The model's API refused this request as it is (400, 413, 422: too long, too many
    tokens): a smaller one may pass. Not a failure of the connection, the key, the rate or
    the answer."""
    status = (exc.details or {}).get("status")
    return exc.code is ErrorCode.PROVIDER_ERROR and status in (400, 413, 422)


#: Tokens each message adds to the observer's input besides its content ("[time] [role]: ").
LINE_OVERHEAD = 16


def observer_llm_settings(om: ObservationalMemorySettings, primary: LLMSettings) -> LLMSettings:
    """The observer's model: observational_memory.provider/model, else the primary one.

    A provider other than the primary one takes nothing of the primary's connection (its
    base_url and api_key_env belong to another API): only what observational_memory sets,
    else that provider's defaults. The same provider inherits what is not set."""
    if not om.model and not om.provider:
        return primary
    provider = om.provider or primary.provider
    if not om.model:
        if provider != primary.provider:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"observational_memory.provider = {provider!r} needs observational_memory.model "
                f"(the primary model is a {primary.provider} model)",
            )
        return primary
    same = provider == primary.provider
    return primary.model_copy(
        update={
            "provider": provider,
            "model": om.model,
            "base_url": om.base_url if om.base_url is not None or not same else primary.base_url,
            "api_key_env": (
                om.api_key_env if om.api_key_env is not None or not same else primary.api_key_env
            ),
        }
    )


class ObserverRuns:
    """The observer and reflector runs, graph extraction, their buffers and their chat
    model."""

    def __init__(self, core: SessionCore, model_factory: Callable[[], ChatModel] | None) -> None:
        self._core = core
        self._model_factory = model_factory
        self._model: ChatModel | None = None
        #: This process's name on the session leases.
        self._owner = f"lamina-{uuid.uuid4()}"
        #: Refusals of one message by the observer: (tenant, session, index) → count.
        self._failures: dict[tuple[str, str, int], int] = {}

    @cached_property
    def buffer(self) -> BackgroundBuffer[Key]:
        """Sessions queued for the observer."""
        return BackgroundBuffer(
            "observation buffer",
            self._process,
            queue_size=self._core.settings.queue_size,
            workers=self._core.settings.workers,
        )

    @cached_property
    def graph_buffer(self) -> BackgroundBuffer[tuple[str, str, str, str]]:
        """Feeds graph extraction: (tenant, session, observation id, observation text)."""
        return BackgroundBuffer(
            "graph buffer",
            self._extract_graph,
            queue_size=self._core.settings.queue_size,
            workers=1,
        )

    async def start(self) -> None:
        """Start the observer's buffers (observational memory on); a configuration problem
        (no chat model) shows here, not at the first trigger."""
        if self._core.settings.enabled:
            self._chat_model()  # a configuration problem shows at start, not at the 1st trigger
            self.buffer.start()
            if self._core.settings.graph:
                self.graph_buffer.start()

    async def close(self) -> None:
        """Stop the buffers and close the observer's chat model."""
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
        """Sessions the observer's queue dropped (full)."""
        return self.buffer.dropped_count()

    def graph_dropped_count(self) -> int:
        """Observations the graph extraction's queue dropped (full)."""
        return self.graph_buffer.dropped_count()

    @property
    def graph_enabled(self) -> bool:
        return self._core.settings.enabled and self._core.settings.graph

    async def flush(self) -> None:
        """Wait until every queued session (and graph extraction) has been processed."""
        await self.buffer.drain()
        await self.graph_buffer.drain()

    async def note_tokens(self, key: Key, tokens: int) -> None:
        """``tokens`` more un-observed in the session; the observer queued at the threshold."""
        pending = self._core.unobserved.get(key)
        if pending is None:
            pending = await self._core.count_unobserved(key)  # first touch in this process
        else:
            pending += tokens
        self._core.unobserved[key] = pending
        if pending >= self._core.settings.message_token_threshold:
            self.buffer.trigger(key)

    async def observe(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Observe the un-observed messages now, whatever their tokens; None if there were
        none or another process holds the session. LLM failures raise here."""
        key = (self._core.tenant(tenant_id), check_session_key(session_key))
        await self._core.ready()
        return await self._leased(key, lambda: self._observe(key, force=True, quiet=False))

    async def reflect(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Condense the session's observations into a reflection now (None if it has none)."""
        key = (self._core.tenant(tenant_id), check_session_key(session_key))
        await self._core.ready()
        return await self._leased(key, lambda: self._reflect(key, force=True, quiet=False))

    async def meta_reflect(self, session_key: str, *, tenant_id: str | None = None) -> Note | None:
        """Consolidate the session's reflections into one of the next generation now,
        whatever reflection_consolidation_threshold says (None with fewer than two)."""
        key = (self._core.tenant(tenant_id), check_session_key(session_key))
        await self._core.ready()
        return await self._leased(key, lambda: self._meta_reflect(key, quiet=False, minimum=2))

    async def _leased(self, key: Key, work: Callable[[], Awaitable[Note | None]]) -> Note | None:
        owned = await self._core.retry.run(
            "lease",
            lambda: self._core.sessions.acquire_lease(
                *key, self._owner, self._core.settings.lease_seconds
            ),
        )
        if not owned:
            log.info("session %r is being observed by another process", key[1])
            return None
        try:
            return await work()
        finally:
            try:
                await self._core.sessions.release_lease(*key, self._owner)
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
        self._core.unobserved[key] = await self._core.count_unobserved(key)

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
        """The un-observed messages, in batches of at most observer_batch_tokens, each
        batch one observer call and one observation, oldest first; the last observation
        made (None if none). A failing batch stops the run: what was observed before it
        stays, and the next trigger starts from it."""
        through = await self._core.sessions.observed_through(*key)
        pending: list[SessionMessage] = await self._core.sessions.list_messages(
            *key, start=through + 1
        )
        tokens = sum(m.token_count for m in pending)
        if not pending or (not force and tokens < self._core.settings.message_token_threshold):
            return None
        notes: list[Note] = []
        # Batches as the observer sees them (content and line overhead; a longer message is a
        # batch alone, clipped when rendered).
        budget = self._core.settings.observer_batch_tokens
        for batch in batches(pending, lambda m: m.token_count + LINE_OVERHEAD, budget):
            made = await self._observe_batch(key, batch, quiet)
            if made is None:
                break
            notes.extend(made)
        if not notes:
            return None
        if self._core.settings.compact:
            summary = "\n\n".join(n.content for n in notes)
            await self._core.sessions.compact_messages(
                *key, notes[-1].source_end, summary, self._core.counter.count(summary)
            )
        return notes[-1]

    async def _observe_batch(
        self, key: Key, batch: list[SessionMessage], quiet: bool
    ) -> list[Note] | None:
        """One observation of ``batch``; on a refusal (an error not worth retrying as is,
        such as a request too long) the batch is split in two and each half observed. A
        single message refused MAX_MESSAGE_FAILURES times is recorded as it is (clipped),
        so that it never blocks the messages after it."""
        limit = self._core.settings.observer_batch_tokens
        try:
            shown = render_messages(batch, max_tokens=limit - LINE_OVERHEAD)
            if not shown:
                return []  # nothing said (items a framework adapter keeps): no call, no note
            text = await self._ask(OBSERVER_SYSTEM, shown)
        except LaminaError as exc:
            if _refused(exc) and len(batch) > 1:
                half = len(batch) // 2
                first = await self._observe_batch(key, batch[:half], quiet)
                second = (
                    None if first is None else await self._observe_batch(key, batch[half:], quiet)
                )
                return None if first is None or second is None else first + second
            kept = self._give_up(key, batch[0], exc) if len(batch) == 1 else None
            if kept is None:
                if not quiet:
                    raise
                log.warning(
                    "observer failed (kept the raw history; the next trigger retries): %s", exc
                )
                return None
            text = kept
        new = NewNote(text, self._core.counter.count(text), 0, (batch[0].index, batch[-1].index))
        note = await self._core.sessions.add_note(*key, new)
        self._failures.pop((*key, batch[0].index), None)
        if self._core.settings.graph and self.graph_buffer.running:
            self.graph_buffer.trigger((*key, note.id, text))
        return [note]

    def _give_up(self, key: Key, message: SessionMessage, exc: LaminaError) -> str | None:
        """The message itself as its observation, once it has failed often enough."""
        slot = (*key, message.index)
        self._failures[slot] = self._failures.get(slot, 0) + 1
        if not _refused(exc) or self._failures[slot] < MAX_MESSAGE_FAILURES:
            return None
        log.warning(
            "the observer refused message %d of session %r %d times; recorded as it is",
            message.index,
            key[1],
            self._failures[slot],
        )
        return render_messages(
            [message], max_tokens=min(500, self._core.settings.observer_batch_tokens)
        )

    async def _ask(self, system: str, text: str) -> str:
        """One model call; PROVIDER_ERROR when the answer is empty."""
        reply = await self._chat_model().generate(request(("user", text), system=system))
        content = reply.content.strip()
        if not content:
            raise LaminaError(
                ErrorCode.PROVIDER_ERROR, "the observer returned nothing", retryable=True
            )
        return content

    async def _reflect(self, key: Key, *, force: bool, quiet: bool) -> Note | None:
        """Observations → one reflection of generation 1, when their tokens reach the
        threshold (or ``force``)."""
        observations = await self._core.sessions.list_notes(*key, reflections=False)
        tokens = sum(n.token_count for n in observations)
        if not observations or (
            not force and tokens < self._core.settings.observation_token_threshold
        ):
            return None
        return await self._condense(key, observations, 1, "reflector", quiet)

    async def _meta_reflect(
        self, key: Key, *, quiet: bool, minimum: int | None = None
    ) -> Note | None:
        """Reflections → one of generation max + 1, when there are enough of them
        (``minimum``, default reflection_consolidation_threshold)."""
        reflections = await self._core.sessions.list_notes(*key, reflections=True)
        needed = (
            self._core.settings.reflection_consolidation_threshold if minimum is None else minimum
        )
        if len(reflections) < needed:
            return None
        generation = max(n.generation for n in reflections) + 1
        return await self._condense(key, reflections, generation, "meta-reflection", quiet)

    async def _condense(
        self, key: Key, notes: list[Note], generation: int, what: str, quiet: bool
    ) -> Note | None:
        text = await self._generate(REFLECTOR_SYSTEM, render_notes(notes), what, quiet)
        if text is None:
            return None
        source = (min(n.source_start for n in notes), max(n.source_end for n in notes))
        new = NewNote(text, self._core.counter.count(text), generation, source)
        note = await self._core.sessions.add_note(*key, new, replaces=[n.id for n in notes])
        return note

    async def _extract_graph(self, item: tuple[str, str, str, str]) -> None:
        tenant, key, _note_id, text = item
        try:
            graph = await self._extract(text)
        except LaminaError as exc:
            log.warning("graph extraction for session %r failed: %s", key, exc)
            return
        await self._save_graph(tenant, key, graph)

    async def extract_graph(
        self, session_key: str, text: str, *, tenant_id: str | None = None
    ) -> tuple[int, int]:
        """Extract entities and relations from ``text`` now (errors raised); returns the new
        (entities, relations)."""
        tenant, key = self._core.tenant(tenant_id), check_session_key(session_key)
        body = check_content(text, self._core.max_content)
        await self._core.ready()
        return await self._save_graph(tenant, key, await self._extract(body))

    async def _extract(self, text: str) -> GraphExtraction:
        """The entities and relations the model finds in ``text``."""
        reply = await self._chat_model().generate(
            request(("user", text), system=GRAPH_SYSTEM, json_output=True)
        )
        return parse_extraction(reply.content)

    async def _save_graph(self, tenant: str, key: str, graph: GraphExtraction) -> tuple[int, int]:
        result: tuple[int, int] = await self._core.retry.run(
            "save graph",
            lambda: self._core.sessions.add_graph(
                tenant,
                key,
                NewGraph(
                    [(e.name, e.type) for e in graph.entities],
                    [(r.source, r.relation, r.target) for r in graph.relations],
                ),
            ),
        )
        return result

    async def graph_context(
        self, query: str, session_key: str | None = None, *, tenant_id: str | None = None
    ) -> list[str]:
        """Relations near the entities ``query`` names (graph_depth hops, graph_limit lines),
        as "source relation target"; only the session's when a session key is given."""
        tenant = self._core.tenant(tenant_id)
        if not isinstance(query, str) or not query.strip():
            return []
        rows = await self._core.call(
            "graph",
            lambda: self._core.sessions.graph_neighbourhood(
                tenant,
                query,
                session_key=session_key or None,
                depth=self._core.settings.graph_depth,
                limit=self._core.settings.graph_limit,
            ),
        )
        return [f"{a} {b} {c}" for a, b, c in rows]
