"""ContextAwareModel: any ChatModel, with its system instruction augmented on every call.

Per call: the latest user message is the query; the session key (and the memory identifiers)
come from the call's context (``session_scope``), never from construction. The runtime
adapter is told the session, then runtime context, tools, user knowledge, skills, external
references and learnings are retrieved, with a session key also the relevant memories,
reflections and observations, all concurrently; the assembled prompt replaces the system
instruction and the call goes to the wrapped model. Retrieval never fails the call: what
cannot be retrieved is left out (and logged).
"""

from __future__ import annotations

import dataclasses
import logging

from lamina.context.keywords import extract_keywords
from lamina.context.models import MODEL_LAYERS
from lamina.context.providers import (
    RuntimeContextAdapter,
    current_identifiers,
    current_session,
)
from lamina.context.service import ContextService
from lamina.errors import LaminaError
from lamina.llm.base import ChatModel, ChatRequest, ChatResponse

log = logging.getLogger(__name__)


class ContextAwareModel:
    def __init__(
        self,
        model: ChatModel,
        context: ContextService,
        *,
        runtime: RuntimeContextAdapter | None = None,
    ) -> None:
        self._model = model
        self._context = context
        self._runtime = runtime
        self.model_id = model.model_id

    async def augment(self, request: ChatRequest) -> ChatRequest:
        """The request as it will be forwarded (system instruction augmented)."""
        session = current_session()
        if self._runtime is not None:
            self._runtime.set_session(session)
        query = request.latest_user_message()
        if not extract_keywords(query):
            return request
        try:
            system = await self._context.build_prompt(
                request.system,
                query[: self._context.settings.max_query_length],
                layers=MODEL_LAYERS,
                session_key=session or "",
                identifiers=current_identifiers() if session else None,
            )
        except LaminaError as exc:
            log.warning("context retrieval failed; forwarding the call unchanged: %s", exc)
            return request
        return dataclasses.replace(request, system=system)

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return await self._model.generate(await self.augment(request))

    async def aclose(self) -> None:
        await self._model.aclose()
