"""``ms.context``: the four searchable layer stores, retrieval, and prompt assembly."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lamina.checks import check_int, invalid
from lamina.config import ContextSettings, MemorySettings
from lamina.context.layer_store import ItemContext
from lamina.context.models import ContextLayer, RetrievalResult
from lamina.context.ports import ContextItemStore
from lamina.context.prompt import Retrieved, assemble_prompt, pack_memories
from lamina.context.providers import (
    RuntimeContextProvider,
    ToolRegistryProvider,
    current_session,
)
from lamina.context.retriever import ContextRetriever, ConversationMemorySource
from lamina.context.searchable_layers import (
    KnowledgeStore,
    LearningStore,
    ReferenceStore,
    SkillStore,
)
from lamina.delegation import Forward
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.core import ServiceCore
from lamina.memory.items import ItemAccess
from lamina.memory.layers import IDENTIFIER_NAMES
from lamina.memory.models import SearchHit, SearchMode
from lamina.memory.service import MemoryService
from lamina.tokens import TokenCounter, default_counter

log = logging.getLogger(__name__)

#: With a token budget for the Relevant Memories section, the memories searched for it
#: beyond the most it may show: the shorter ones that can take a longer one's place.
RAG_SPARE = 4


@dataclass(frozen=True, slots=True)
class BuiltPrompt:
    """An assembled system prompt and the ids of the memories whose text it holds (its
    Relevant Memories section): what a door keeping the prompt must forget with them."""

    text: str
    memory_ids: tuple[str, ...] = ()


class ContextService(ServiceCore):
    def __init__(
        self,
        items: ItemAccess[ContextItemStore],
        settings: ContextSettings,
        memory_settings: MemorySettings,
        *,
        memory: MemoryService,
        default_tenant: str,
        ready: Callable[[], Awaitable[None]],
        counter: TokenCounter | None = None,
        memory_token_budget: int = 4000,
    ) -> None:
        """``items``: the store of the four layers' items, the embedding of their content
        (through the persistent cache) and of search queries (shared with the memory
        service so that a prompt's query is embedded once for both), retries."""
        super().__init__(default_tenant=default_tenant, ready=ready)
        self.settings = settings
        self.memory_token_budget = memory_token_budget
        self._memory = memory
        self.counter: TokenCounter = counter or default_counter()
        ctx = ItemContext(
            items=items,
            ready=ready,
            default_tenant=default_tenant,
            max_content_length=memory_settings.max_content_length,
            max_query_length=settings.max_query_length,
            max_limit=memory_settings.max_limit,
            search_mode=SearchMode(settings.search_mode),
        )
        self.knowledge = KnowledgeStore(ctx)
        self.learnings = LearningStore(ctx)
        self.skills = SkillStore(ctx)
        self.references = ReferenceStore(ctx)
        self._retriever = ContextRetriever(
            knowledge=self.knowledge,
            learnings=self.learnings,
            skills=self.skills,
            references=self.references,
            query_vector=items.queries.get,
            search_mode=SearchMode(settings.search_mode),
            min_score=settings.min_score,
            max_query_length=settings.max_query_length,
        )

    @property
    def retriever(self) -> ContextRetriever:
        """The retriever behind ``retrieve``: the layer stores and the providers it asks."""
        return self._retriever

    # -- providers --------------------------------------------------------------------------

    tool_registry = Forward[ToolRegistryProvider | None](
        "retriever", "The Tool Registry layer's provider (None: none).", settable=True, name="tools"
    )
    runtime_context = Forward[RuntimeContextProvider | None](
        "retriever",
        "The Runtime Context layer's provider (None: none).",
        settable=True,
        name="runtime",
    )
    conversation_memory = Forward[ConversationMemorySource | None](
        "retriever",
        "Observations and reflections of a session (None: none).",
        settable=True,
        name="conversation",
    )

    # -- retrieval and assembly -------------------------------------------------------------

    async def retrieve(
        self,
        query: str,
        layers: Sequence[ContextLayer | str] | str | None = None,
        max_per_layer: int | None = None,
        session_key: str | None = None,
        *,
        tenant_id: str | None = None,
        runtime: RuntimeContextProvider | None = None,
    ) -> RetrievalResult:
        """Context for ``query`` from the layers asked for (default: user knowledge, skill
        patterns, external knowledge, agent learnings), at most ``max_per_layer`` each.
        ``runtime``, when given, provides the runtime context instead of
        ``runtime_context``."""
        await self._ready()
        tenant = self._tenant(tenant_id)
        return await self._retriever.retrieve(
            query,
            layers=layers,
            max_per_layer=self.settings.max_per_layer if max_per_layer is None else max_per_layer,
            session_key=session_key if session_key is not None else current_session(),
            tenant=tenant,
            runtime=runtime,
        )

    def assemble_prompt(
        self,
        base: str,
        retrieved: Retrieved = (),
        reflections: Sequence[str] = (),
        observations: Sequence[str] = (),
        *,
        memories: Sequence[str] = (),
        graph: Sequence[str] = (),
        token_budget: int | None = None,
    ) -> str:
        """The base prompt with the retrieved context appended (see context/prompt.py)."""
        if not isinstance(base, str):
            raise invalid("base must be a string")
        budget = self.memory_token_budget if token_budget is None else token_budget
        check_int("token_budget", budget, minimum=0)
        return assemble_prompt(
            base,
            retrieved,
            reflections,
            observations,
            memories=memories,
            graph=graph,
            token_budget=budget,
            counter=self.counter,
        )

    async def relevant_memories(
        self,
        query: str,
        identifiers: Mapping[str, str],
        session_key: str | None,
        *,
        tenant_id: str | None = None,
    ) -> list[str]:
        """The RAG section: a search of the memory store (default mode, hybrid) for the
        caller's scope.
        With a session key the session's own memories take part and no other session's do."""
        return [
            h.memory.content
            for h in await self._relevant_hits(query, identifiers, session_key, tenant_id)
        ]

    async def _relevant_hits(
        self,
        query: str,
        identifiers: Mapping[str, str],
        session_key: str | None,
        tenant_id: str | None,
    ) -> list[SearchHit]:
        if self.settings.rag_limit == 0 or not identifiers or not query.strip():
            return []
        budget = self.settings.rag_token_budget
        ids = {k: identifiers.get(k) for k in IDENTIFIER_NAMES}
        if session_key:
            ids["session_id"] = session_key
        hits = await self._memory.search(
            query,
            agent_id=ids["agent_id"],
            user_id=ids["user_id"],
            session_id=ids["session_id"],
            project_id=ids["project_id"],
            team_id=ids["team_id"],
            org_id=ids["org_id"],
            company_id=ids["company_id"],
            limit=min(
                self.settings.rag_limit + (0 if budget is None else RAG_SPARE),
                max(self.settings.rag_limit, self._memory.shared.settings.max_limit),
            ),
            threshold=self.settings.rag_threshold,
            tenant_id=tenant_id,
        )
        shown = pack_memories(
            [h.memory.content for h in hits], self.settings.rag_limit, budget, self.counter
        )
        return [hits[i] for i in shown]

    async def build_prompt(
        self,
        base: str,
        query: str,
        *,
        layers: Sequence[ContextLayer | str] | str | None = None,
        session_key: str | None = None,
        identifiers: Mapping[str, str] | None = None,
        tenant_id: str | None = None,
        runtime: RuntimeContextProvider | None = None,
    ) -> str:
        """retrieve + the memory store's relevant memories + conversation memory, assembled.
        Each part that fails is logged and left out; the base prompt always comes back.
        ``runtime``, when given, provides the runtime context instead of
        ``runtime_context``."""
        built = await self.compose_prompt(
            base,
            query,
            layers=layers,
            session_key=session_key,
            identifiers=identifiers,
            tenant_id=tenant_id,
            runtime=runtime,
        )
        return built.text

    async def compose_prompt(
        self,
        base: str,
        query: str,
        *,
        layers: Sequence[ContextLayer | str] | str | None = None,
        session_key: str | None = None,
        identifiers: Mapping[str, str] | None = None,
        tenant_id: str | None = None,
        runtime: RuntimeContextProvider | None = None,
    ) -> BuiltPrompt:
        """``build_prompt``'s prompt and the ids of the memories it holds the text of."""
        session = session_key if session_key is not None else current_session()
        conversation = self._retriever.conversation

        async def memories() -> list[SearchHit]:
            return await self._relevant_hits(query, identifiers or {}, session, tenant_id)

        async def recent(kind: str) -> list[str]:
            if conversation is None or not session:
                return []
            if kind == "reflections":
                return await conversation.recent_reflections(session, 1000, tenant_id=tenant_id)
            return await conversation.recent_observations(session, 1000, tenant_id=tenant_id)

        async def graph() -> list[str]:
            lines = getattr(conversation, "graph_context", None)
            if lines is None or not getattr(conversation, "graph_enabled", False):
                return []
            found: list[str] = await lines(query, session or None, tenant_id=tenant_id)
            return found

        results = await asyncio.gather(
            self.retrieve(query, layers, session_key=session, tenant_id=tenant_id, runtime=runtime),
            memories(),
            recent("reflections"),
            recent("observations"),
            graph(),
            return_exceptions=True,
        )
        parts: list[Any] = []
        result: Any
        for name, result in zip(
            ("context", "memories", "reflections", "observations", "graph"), results, strict=True
        ):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                if (
                    name == "context"
                    and isinstance(result, LaminaError)
                    and result.code
                    in (
                        ErrorCode.INVALID_ARGUMENT,
                        ErrorCode.INVALID_LAYER,
                    )
                ):
                    raise result
                log.warning("building the prompt: %s failed: %s", name, result)
                result = None
            parts.append(result)
        retrieved, rag, reflections, observations, facts = parts
        hits: list[SearchHit] = rag or []
        text = self.assemble_prompt(
            base,
            retrieved or (),
            reflections or (),
            observations or (),
            memories=[h.memory.content for h in hits],
            graph=facts or (),
        )
        return BuiltPrompt(text, tuple(h.memory.id for h in hits))

    async def flush(self) -> None:
        """Wait for the background writes retrieval started (knowledge use counts)."""
        await self._retriever.drain()

    async def close(self) -> None:
        await self.flush()
