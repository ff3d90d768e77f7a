"""The composition root: builds every service from Settings and owns their lifecycles."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict

from lamina.backend import Backend, HealthStatus
from lamina.config import Settings, load_settings
from lamina.context.aware_model import ContextAwareModel
from lamina.context.ports import ContextItemStore
from lamina.context.providers import RuntimeContextAdapter
from lamina.context.service import ContextService
from lamina.embeddings import Embedder, build_embedder
from lamina.embeddings.query_cache import QueryVectors
from lamina.embeddings.shared_queries import SharedQueryVectors
from lamina.extras import require
from lamina.governance.service import GovernanceService
from lamina.knowledge.gitstore import GitStore
from lamina.knowledge.index import KnowledgeIndex, embed_text, item_of
from lamina.knowledge.repository import Repository
from lamina.knowledge.service import KnowledgeService
from lamina.llm.base import ChatModel
from lamina.memory.items import ContextRecord, ItemAccess, ItemKind, ItemStore
from lamina.memory.models import SearchMode
from lamina.memory.service import MemoryService
from lamina.metrics import Metrics
from lamina.observational.base import SessionCore
from lamina.observational.service import SessionService, observer_llm_settings
from lamina.store.sqlite import SQLiteStore
from lamina.threads.calls import Calls
from lamina.threads.ports import CleanupCounts
from lamina.threads.service import ThreadService
from lamina.tokens import TokenCounter, default_counter


def build_store(settings: Settings, embedder: Embedder) -> Backend:
    """The store the settings' database URL names (SQLite file by default)."""
    if settings.store_kind() == "postgresql":
        require("postgres")
        from lamina.store.postgres import PostgresStore

        pg = settings.postgres
        return PostgresStore(
            settings.database_url or "",
            embedder,
            pool_min=pg.pool_min,
            pool_max=pg.pool_max,
            statement_timeout_ms=pg.statement_timeout_ms,
            connect_timeout=pg.connect_timeout,
            ef_search=pg.hnsw_ef_search,
        )
    return SQLiteStore(settings.sqlite_path(), embedder, busy_timeout=settings.sqlite_busy_timeout)


def _item_text(record: ContextRecord) -> str:
    """What a context item's vector stands for: the knowledge index embeds its items'
    title and summary, the other layers their content."""
    if record.kind is ItemKind.DOCUMENT:
        return embed_text(item_of(record))
    return record.content


class RuntimeOptions(TypedDict, total=False):
    """The keyword arguments of AsyncLamina and Lamina after ``settings``."""

    data_dir: str | Path | None
    database_url: str | None
    tenant_id: str | None
    config_file: str | Path | None
    embedder: Embedder | None
    chat_model: ChatModel | None


class AsyncLamina:
    """lamina for asyncio code: ``async with AsyncLamina(data_dir=...) as ms: ...``.

    ``embedder`` and ``chat_model`` replace the ones the settings would build (the chat
    model serves memory consolidation, ``infer=True``, and the observer and reflector of
    observational memory)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        data_dir: str | Path | None = None,
        database_url: str | None = None,
        tenant_id: str | None = None,
        config_file: str | Path | None = None,
        embedder: Embedder | None = None,
        chat_model: ChatModel | None = None,
    ) -> None:
        self.settings = settings or load_settings(
            config_file, data_dir=data_dir, database_url=database_url, tenant_id=tenant_id
        )
        self.embedder = embedder or build_embedder(self.settings.embedding)
        self.counter: TokenCounter = default_counter()
        self.store: Backend = build_store(self.settings, self.embedder)
        self.metrics = Metrics()
        queries = QueryVectors(
            lambda tenant, texts: self.store.memories.embeddings.generate_embedding(
                tenant, texts, cache=False
            ),
            self.settings.retry.policy(),
        )
        self._queries = queries
        self.memory = MemoryService(
            self.store.memories,
            self.settings.memory,
            default_tenant=self.settings.tenant_id,
            metrics=self.metrics.memory,
            retry=self.settings.retry.policy(),
            ready=self.start,
            queries=queries,
        )
        items = self._item_access(queries)
        self.context = ContextService(
            items,
            self.settings.context,
            self.settings.memory,
            memory=self.memory,
            default_tenant=self.settings.tenant_id,
            ready=self.start,
            counter=self.counter,
            memory_token_budget=self.settings.observational_memory.memory_token_budget,
        )
        om = self.settings.observational_memory
        self.sessions = SessionService(
            SessionCore(
                self.store.sessions,
                om,
                default_tenant=self.settings.tenant_id,
                counter=self.counter,
                retry=self.settings.retry.policy(),
                ready=self.start,
                max_content_length=self.settings.memory.max_content_length,
            ),
            self._model_factory(chat_model),
        )
        self.context.conversation_memory = self.sessions
        self.knowledge = self._build_knowledge(items)
        self.memory.item_text = _item_text
        self.governance = GovernanceService(
            self.knowledge,
            self.memory.resolve_identifiers,
            self.settings.governance,
            max_content_length=self.settings.memory.max_content_length,
        )
        self.knowledge.guard = self.governance.check_knowledge_write
        self.knowledge.secret_guard = self.governance.check_secrets
        self.memory.write_guard = self._memory_guard
        #: Chat models this runtime built (closed with it).
        self._chat_models: list[ChatModel] = []
        self.memory.chat_model = self._memory_model(chat_model)
        self.memory.counter = self.counter
        self._started = False
        self._closed = False
        self._start_lock: asyncio.Lock | None = None

    def share_query_vectors(self, arena: Any, lock: Any) -> None:
        """Keep query vectors where the other processes of one server find them too
        (``lamina serve --workers``): ``arena`` and ``lock`` from
        ``lamina.embeddings.shared_queries.make_arena``, given to every process."""
        self._queries.shared = SharedQueryVectors(
            arena,
            lock,
            f"{self.embedder.model_id}/{self.embedder.dimensions}",
            self.embedder.dimensions,
        )

    def _item_access(self, queries: QueryVectors) -> ItemAccess[ContextItemStore]:
        """The store's context items as the context layers and the knowledge index reach
        them: item text embedded through the persistent cache, ``queries`` for queries."""
        return ItemAccess(
            self.store.context_items,
            lambda tenant, texts: self.store.memories.embeddings.generate_embedding(tenant, texts),
            queries,
            self.settings.retry.policy(),
            self.settings.context.semantic_weight,
        )

    def _build_knowledge(self, items: ItemAccess[ItemStore]) -> KnowledgeService:
        ks = self.settings.knowledge
        index = KnowledgeIndex(items)
        return KnowledgeService(
            Repository(
                GitStore(self.settings.knowledge_path(), lock_timeout=ks.lock_timeout),
                index,
                default_tenant=self.settings.tenant_id,
                ready=self.start,
                max_content_length=self.settings.memory.max_content_length,
                max_query_length=self.settings.memory.max_query_length,
                max_limit=self.settings.memory.max_limit,
                search_mode=SearchMode(self.settings.context.search_mode),
            )
        )

    async def _memory_guard(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """governance.check_memory_write (the memory port's WriteGuard), as JSON."""
        found = await self.governance.check_memory_write(*args, **kwargs)
        return [v.model_dump(mode="json") for v in found]

    async def start(self) -> None:
        """Open the store and apply migrations; calls made before ``start`` start it."""
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            if self._closed:
                from lamina.errors import ErrorCode, LaminaError

                raise LaminaError(ErrorCode.CONFIGURATION_ERROR, "this lamina is closed")
            await self.settings.retry.policy().run("initialize", self.store.initialize)
            self._started = True
            try:
                await self.sessions.start()  # checks its configuration before it starts
                self.memory.embedding_buffer.start()
                self.memory.start_expiry()
            except BaseException:
                self._started = False
                await self._stop_background()
                await self.store.shutdown()
                raise

    async def _stop_background(self) -> None:
        """Stop what ``start`` starts: the sessions' work, the embedding buffer, expiry."""
        await self.sessions.close()
        await self.memory.embedding_buffer.stop()
        await self.memory.stop_expiry()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._stop_background()
        await self.context.close()
        await self.store.shutdown()
        await self.embedder.aclose()
        for model in self._chat_models:
            await model.aclose()
        self.knowledge.git.close()

    def _model_factory(self, given: ChatModel | None) -> Callable[[], ChatModel] | None:
        if given is not None:
            return lambda: given
        om, llm = self.settings.observational_memory, self.settings.llm
        return self._observer_model if (om.model or llm.model) else None

    def _memory_model(self, given: ChatModel | None) -> Callable[[], ChatModel] | None:
        """The chat model of consolidation (``infer=True``): the one given, else the ``llm``
        settings' (built once, when first needed), else none."""
        if given is not None:
            return lambda: given
        if not self.settings.llm.model:
            return None
        built = self._chat_models

        def model() -> ChatModel:
            if not built:
                from lamina.llm import build_chat_model

                built.append(build_chat_model(self.settings.llm))
            return built[0]

        return model

    def _observer_model(self) -> ChatModel:
        from lamina.llm import build_chat_model

        om, llm = self.settings.observational_memory, self.settings.llm
        return build_chat_model(observer_llm_settings(om, llm))

    def context_model(
        self,
        model: ChatModel | None = None,
        *,
        runtime: RuntimeContextAdapter | None = None,
        **options: Any,
    ) -> ContextAwareModel:
        """``model`` (default: the one ``llm`` names) as a ContextAwareModel over this
        root's context and sessions: every call is augmented, and inside
        ``session_scope(key)`` the turn is kept in the session. ``options`` are
        ContextAwareModel's (append_turn, include_history, message_token_budget, timeout,
        context_timeout, tenant_id)."""
        from lamina.llm import build_chat_model

        chat = model if model is not None else build_chat_model(self.settings.llm)
        return ContextAwareModel(
            chat, self.context, runtime=runtime, sessions=self.sessions, **options
        )

    def thread_service(
        self, *, on_cleanup: Callable[[CleanupCounts], None] | None = None
    ) -> ThreadService:
        """A thread service over this root's store (the A2A server's threads and tasks),
        with its start-up, retries and metrics (``a2a_thread_operations_*``, with the
        server's families); ``on_cleanup`` hears each cleanup's counts. The caller owns its
        cleanup loop (``start``, ``stop``)."""
        calls = Calls(
            retry=self.settings.retry.policy(),
            ready=self.start,
            metrics=self.metrics.server().threads,
        )
        return ThreadService(
            self.store.threads, self.settings.server, on_cleanup=on_cleanup, calls=calls
        )

    @property
    def schema_version(self) -> int:
        """The migration the database is at (0 until the runtime has started)."""
        return self.store.schema_version

    async def check_database(self) -> HealthStatus:
        """The database's own health check (reachable, schema version, pool): what
        ``/health`` reports as its ``database`` check. Does not start the runtime."""
        return await self.store.health_check()

    async def health(self) -> dict[str, Any]:
        await self.start()
        status = await self.check_database()
        knowledge = await self.knowledge.check()
        return {
            "healthy": status.healthy and bool(knowledge["healthy"]),
            "store": status.details,
            "knowledge": knowledge,
            "capabilities": self.store.capabilities().to_dict(),
            "embedding_model": self.embedder.model_id,
            "embedding": self.store.memories.embeddings.embedding_status().to_dict(),
        }

    def metrics_text(self) -> str:
        return self.metrics.render().decode("utf-8")

    async def __aenter__(self) -> AsyncLamina:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
