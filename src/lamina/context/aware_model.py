"""ContextAwareModel: any ChatModel, with its system instruction augmented on every call.

Per call: the session key (and the memory identifiers) come from the call's context
(``session_scope``), never from construction. With a session key and a session log:

1. the session's recent, not yet observed messages are read (its history);
2. the new messages of the turn are appended to the session (``append_turn``);
3. history + new messages, cut to ``message_token_budget`` (newest kept), are what the
   wrapped model receives (``include_history``);
4. after the call, the reply (text and tool calls) is appended too.

The session's base system prompt is kept with it: a request's ``system`` (given once) is
stored as the session's and used by every later call that has none, until a new one
replaces it (``ms.sessions.set_system_prompt(key, None)`` clears it).

Every call, whatever the query: the runtime adapter is told the session; runtime context
and, with a session key, the session's reflections and observations are always injected;
the query for the searchable layers (tools, knowledge, skills, references, learnings,
relevant memories) is the latest user message, or for a follow-up without keywords ("why?")
the latest user message that has some. Retrieval never fails the call (what cannot be
retrieved within ``context_timeout`` is left out, and logged); ``timeout`` bounds the whole
call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Sequence

from lamina.context.models import MODEL_LAYERS
from lamina.context.providers import (
    RuntimeContextAdapter,
    current_identifiers,
    current_session,
)
from lamina.context.service import ContextService
from lamina.context.turns import (
    SessionLog,
    from_records,
    reply_record,
    to_records,
    topic_query,
    within_budget,
)
from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatChunk, ChatMessage, ChatModel, ChatRequest, ChatResponse, stream_of

log = logging.getLogger(__name__)

#: Seconds retrieval may take before the call goes out without the missing context.
CONTEXT_TIMEOUT = 10.0
#: The message token budget when there is no session log to take it from.
DEFAULT_MESSAGE_BUDGET = 8000


class ContextAwareModel:
    def __init__(
        self,
        model: ChatModel,
        context: ContextService,
        *,
        runtime: RuntimeContextAdapter | None = None,
        sessions: SessionLog | None = None,
        append_turn: bool = True,
        include_history: bool = True,
        message_token_budget: int | None = None,
        timeout: float | None = None,
        context_timeout: float = CONTEXT_TIMEOUT,
        tenant_id: str | None = None,
    ) -> None:
        """``sessions`` keeps the conversation (``ms.sessions``); without it, or with
        ``append_turn=False`` / ``include_history=False``, the caller does that part itself.
        ``message_token_budget`` bounds the messages sent (default: the session log's
        max_message_token_budget, else 8000). ``timeout`` (seconds) bounds each whole call,
        retrieval and the model together: PROVIDER_ERROR (retryable) when it runs out."""
        for name, value in (("timeout", timeout), ("context_timeout", context_timeout)):
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise LaminaError(ErrorCode.INVALID_ARGUMENT, f"{name} must be > 0 seconds")
        self._model = model
        self._context = context
        self._runtime = runtime
        self._sessions = sessions
        self._append = append_turn
        self._history = include_history
        settings = getattr(sessions, "settings", None)
        fallback = getattr(settings, "max_message_token_budget", DEFAULT_MESSAGE_BUDGET)
        self._budget = int(message_token_budget or fallback)
        self._timeout = timeout
        self._context_timeout = context_timeout
        self._tenant = tenant_id
        self.model_id = model.model_id

    # -- the turn ---------------------------------------------------------------------------

    async def _messages(self, request: ChatRequest, session: str | None) -> list[ChatMessage]:
        """History (when kept here) + the new messages, within the budget; the new ones
        appended to the session."""
        new = list(request.messages)
        history: list[ChatMessage] = []
        if session and self._sessions is not None:
            if self._history:
                records = await self._sessions.recent_messages(session, tenant_id=self._tenant)
                history = from_records(records)
            if self._append:
                rows = to_records(new, history)
                if rows:
                    await self._sessions.append_many(session, rows, tenant_id=self._tenant)
        counter = self._context.counter
        conversation = [m for m in history if m.role != "system"] + new
        return within_budget(conversation, self._budget, counter)

    async def _base(self, request: ChatRequest, session: str | None, *, keep: bool) -> str:
        """The base system prompt of the call: the request's own, kept as the session's
        (``keep`` and ``append_turn``) when it changes; without one, the session's kept one
        (with ``include_history``)."""
        if not session or self._sessions is None:
            return request.system
        if not request.system.strip():
            if not self._history:
                return request.system
            kept = await self._sessions.system_prompt(session, tenant_id=self._tenant)
            return request.system if kept is None else kept
        if keep and self._append:
            kept = await self._sessions.system_prompt(session, tenant_id=self._tenant)
            if kept != request.system:
                await self._sessions.set_system_prompt(
                    session, request.system, tenant_id=self._tenant
                )
        return request.system

    async def _record_reply(self, session: str | None, reply: ChatResponse) -> None:
        if not session or self._sessions is None or not self._append:
            return
        row = reply_record(reply)
        if row is not None:
            await self._sessions.append_many(session, [row], tenant_id=self._tenant)

    async def _system(self, base: str, messages: Sequence[ChatMessage]) -> str:
        """The augmented system instruction; the base one on trouble."""
        session = current_session()
        if self._runtime is not None:
            self._runtime.set_session(session)
        query = topic_query(messages)
        try:
            async with asyncio.timeout(self._context_timeout):
                return await self._context.build_prompt(
                    base,
                    query[: self._context.settings.max_query_length],
                    layers=MODEL_LAYERS,
                    session_key=session or "",
                    identifiers=current_identifiers() if session else None,
                    tenant_id=self._tenant,
                    runtime=self._runtime,
                )
        except (LaminaError, TimeoutError) as exc:
            log.warning("context retrieval failed; the call goes out without it: %r", exc)
            return base

    async def prepare(self, request: ChatRequest) -> ChatRequest:
        """The request as it will be forwarded: the conversation kept by the session (and
        the new messages appended to it), the session's base system prompt (a new one kept
        in its place), augmented."""
        session = current_session()
        base = await self._base(request, session, keep=True)
        messages = await self._messages(request, session)
        system = await self._system(base, messages)
        return dataclasses.replace(request, system=system, messages=tuple(messages))

    async def augment(self, request: ChatRequest) -> ChatRequest:
        """The request with its system instruction augmented (the session's base one when
        it has none), messages untouched; nothing is kept in the session."""
        base = await self._base(request, current_session(), keep=False)
        return dataclasses.replace(request, system=await self._system(base, list(request.messages)))

    # -- the calls --------------------------------------------------------------------------

    def _timed_out(self) -> LaminaError:
        return LaminaError(
            ErrorCode.PROVIDER_ERROR,
            f"the model call did not finish within {self._timeout} s",
            retryable=True,
        )

    async def generate(self, request: ChatRequest) -> ChatResponse:
        session = current_session()
        try:
            async with asyncio.timeout(self._timeout):
                reply = await self._model.generate(await self.prepare(request))
        except TimeoutError:
            raise self._timed_out() from None
        await self._record_reply(session, reply)
        return reply

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The reply as it comes (the wrapped model's stream, or its whole reply as one
        chunk); the reply is appended to the session once complete."""
        session = current_session()
        loop = asyncio.get_running_loop()
        deadline = None if self._timeout is None else loop.time() + self._timeout
        try:
            async with asyncio.timeout_at(deadline):
                prepared = await self.prepare(request)
            chunks = stream_of(self._model, prepared)
            while True:
                async with asyncio.timeout_at(deadline):
                    try:
                        chunk = await anext(chunks)
                    except StopAsyncIteration:
                        return
                if chunk.done and chunk.response is not None:
                    await self._record_reply(session, chunk.response)
                yield chunk
        except TimeoutError:
            raise self._timed_out() from None

    async def aclose(self) -> None:
        await self._model.aclose()
