"""The composition root: builds every service from Settings and owns their lifecycles."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures.thread  # its exit hook must be registered before ours: _remember
import contextlib
import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from prometheus_client import CollectorRegistry

from lamina.config import Settings, load_settings
from lamina.context.service import ContextService
from lamina.embeddings import Embedder, build_embedder
from lamina.embeddings.query_cache import QueryVectors
from lamina.errors import ErrorCode, LaminaError
from lamina.extras import require
from lamina.governance.service import GovernanceService
from lamina.knowledge.gitstore import GitStore
from lamina.knowledge.index import KnowledgeIndex
from lamina.knowledge.promotion import Promotions
from lamina.knowledge.service import KnowledgeService
from lamina.llm.base import ChatModel
from lamina.memory.models import SearchMode
from lamina.memory.service import MemoryService
from lamina.metrics import MemoryMetrics
from lamina.observational.service import SessionService, observer_llm_settings
from lamina.store.base import MemoryStore
from lamina.store.sqlite import SQLiteStore
from lamina.tokens import TokenCounter, default_counter

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger(__name__)


def build_store(settings: Settings, embedder: Embedder) -> MemoryStore:
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


class AsyncLamina:
    """lamina for asyncio code: ``async with AsyncLamina(data_dir=...) as ms: ...``.

    ``embedder`` and ``chat_model`` replace the ones the settings would build (the chat
    model serves the observer and reflector of observational memory)."""

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
        self.store: MemoryStore = build_store(self.settings, self.embedder)
        self.registry = CollectorRegistry(auto_describe=True)
        self.metrics = MemoryMetrics(self.registry)
        queries = QueryVectors(
            lambda tenant, texts: self.store.generate_embedding(tenant, texts, cache=False),
            self.settings.retry.policy(),
        )
        self.memory = MemoryService(
            self.store,
            self.settings.memory,
            default_tenant=self.settings.tenant_id,
            metrics=self.metrics,
            retry=self.settings.retry.policy(),
            ready=self.start,
            queries=queries,
        )
        self.context = ContextService(
            self.store,
            self.settings.context,
            self.settings.memory,
            memory=self.memory,
            default_tenant=self.settings.tenant_id,
            retry=self.settings.retry.policy(),
            ready=self.start,
            queries=queries,
            counter=self.counter,
            memory_token_budget=self.settings.observational_memory.memory_token_budget,
        )
        om = self.settings.observational_memory
        self.sessions = SessionService(
            self.store,
            om,
            default_tenant=self.settings.tenant_id,
            counter=self.counter,
            retry=self.settings.retry.policy(),
            ready=self.start,
            max_content_length=self.settings.memory.max_content_length,
            model_factory=self._model_factory(chat_model),
        )
        self.context.conversation_memory = self.sessions
        self.knowledge = self._build_knowledge(queries)
        self.knowledge.promotions = Promotions(self.knowledge)
        self.governance = GovernanceService(
            self.knowledge,
            self.memory.resolve_identifiers,
            self.settings.governance,
            max_content_length=self.settings.memory.max_content_length,
        )
        self.knowledge.guard = self.governance.check_knowledge_write
        self.memory.write_guard = self._memory_guard
        self._started = False
        self._closed = False
        self._start_lock: asyncio.Lock | None = None

    def _build_knowledge(self, queries: QueryVectors) -> KnowledgeService:
        ks = self.settings.knowledge
        index = KnowledgeIndex(
            self.store.context_items,
            lambda tenant, texts: self.store.generate_embedding(tenant, texts),
            queries,
            self.settings.retry.policy(),
            self.settings.context.semantic_weight,
        )
        return KnowledgeService(
            GitStore(self.settings.knowledge_path(), lock_timeout=ks.lock_timeout),
            index,
            default_tenant=self.settings.tenant_id,
            ready=self.start,
            max_content_length=self.settings.memory.max_content_length,
            max_query_length=self.settings.memory.max_query_length,
            max_limit=self.settings.memory.max_limit,
            search_mode=SearchMode(self.settings.context.search_mode),
        )

    async def _memory_guard(
        self, tenant: str, layer: str, identifiers: Mapping[str, str], content: str
    ) -> list[dict[str, Any]]:
        found = await self.governance.check_memory_write(tenant, layer, identifiers, content)
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
            except BaseException:
                self._started = False
                await self.sessions.close()
                await self.memory.embedding_buffer.stop()
                await self.store.shutdown()
                raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.sessions.close()
        await self.memory.embedding_buffer.stop()
        await self.context.close()
        await self.store.shutdown()
        await self.embedder.aclose()
        self.knowledge.git.close()

    def _model_factory(self, given: ChatModel | None) -> Callable[[], ChatModel] | None:
        if given is not None:
            return lambda: given
        om, llm = self.settings.observational_memory, self.settings.llm
        return self._observer_model if (om.model or llm.model) else None

    def _observer_model(self) -> ChatModel:
        from lamina.llm import build_chat_model

        om, llm = self.settings.observational_memory, self.settings.llm
        return build_chat_model(observer_llm_settings(om, llm))

    async def health(self) -> dict[str, Any]:
        await self.start()
        status = await self.store.health_check()
        knowledge = await self.knowledge.check()
        return {
            "healthy": status.healthy and bool(knowledge["healthy"]),
            "store": status.details,
            "knowledge": knowledge,
            "capabilities": self.store.capabilities().to_dict(),
            "embedding_model": self.embedder.model_id,
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


def _bridge(
    method: Callable[Concatenate[MemoryService, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[SyncMemory, P], R]:
    def call(self: SyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._runner(method(self._service, *args, **kwargs))
        return result

    functools.update_wrapper(call, method)
    return call


class SyncMemory:
    """The blocking twin of MemoryService: the same calls, the same arguments."""

    def __init__(
        self, service: MemoryService, runner: Callable[[Coroutine[Any, Any, Any]], Any]
    ) -> None:
        self._service = service
        self._runner = runner

    add = _bridge(MemoryService.add)
    bulk_add = _bridge(MemoryService.bulk_add)
    search = _bridge(MemoryService.search)
    get = _bridge(MemoryService.get)
    update = _bridge(MemoryService.update)
    delete = _bridge(MemoryService.delete)
    bulk_delete = _bridge(MemoryService.bulk_delete)
    list = _bridge(MemoryService.list)
    history = _bridge(MemoryService.history)
    embed_pending = _bridge(MemoryService.embed_pending)
    flush_embeddings = _bridge(MemoryService.flush_embeddings)
    register_hierarchy = _bridge(MemoryService.register_hierarchy)
    set_hierarchy_defaults = _bridge(MemoryService.set_hierarchy_defaults)
    resolve_identifiers = _bridge(MemoryService.resolve_identifiers)


class SyncProxy:
    """The blocking twin of an async service: its coroutine methods run on the facade's
    loop and return their results; sub-services (``ms.context.knowledge``) are wrapped too."""

    def __init__(self, target: Any, runner: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._target = target
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.iscoroutinefunction(value):

            @functools.wraps(value)
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._runner(value(*args, **kwargs))

            return call
        if (
            type(value).__module__.startswith(("lamina.context", "lamina.knowledge"))
            and not callable(value)
            and not isinstance(value, type)
        ):
            return SyncProxy(value, self._runner)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._target, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._target)))


class Lamina:
    """lamina for blocking code: a thin facade running AsyncLamina on its own loop.

    ``with Lamina(data_dir="./memdata") as ms: ms.memory.add(...)``
    """

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
        self._async = AsyncLamina(
            settings,
            data_dir=data_dir,
            database_url=database_url,
            tenant_id=tenant_id,
            config_file=config_file,
            embedder=embedder,
            chat_model=chat_model,
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="lamina-loop", daemon=True
        )
        self._thread.start()
        self.memory = SyncMemory(self._async.memory, self._run)
        #: ``ms.context``: the same calls as AsyncLamina.context, blocking.
        self.context: Any = SyncProxy(self._async.context, self._run)
        #: ``ms.sessions``: the same calls as AsyncLamina.sessions, blocking.
        self.sessions: Any = SyncProxy(self._async.sessions, self._run)
        #: ``ms.knowledge`` (with ``ms.knowledge.promotions``) and ``ms.governance``, blocking.
        self.knowledge: Any = SyncProxy(self._async.knowledge, self._run)
        self.governance: Any = SyncProxy(self._async.governance, self._run)
        self._close_lock = threading.Lock()
        self._closing: concurrent.futures.Future[None] | None = None
        try:
            self._run(self._async.start())
        except BaseException:
            self._stop_loop()
            raise
        _remember(self)

    @property
    def settings(self) -> Settings:
        return self._async.settings

    @property
    def aio(self) -> AsyncLamina:
        """The AsyncLamina underneath (its coroutines run on this facade's loop)."""
        return self._async

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        if self._loop.is_closed() or threading.get_ident() == self._thread.ident:
            coro.close()
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                "this lamina is closed"
                if self._loop.is_closed()
                else "a blocking Lamina call cannot run on its own event-loop thread; "
                "use ms.aio (AsyncLamina) from coroutines",
            )
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def health(self) -> dict[str, Any]:
        return self._run(self._async.health())

    def metrics_text(self) -> str:
        return self._async.metrics_text()

    def _stop_loop(self) -> None:
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            # Whatever close() left behind is cancelled and awaited here, as asyncio.run
            # does, so no task is destroyed while pending.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def close(self, *, timeout: float | None = None) -> None:
        """Finish background work (embeddings, observers), close the store and stop the
        loop. Idempotent and callable from any thread (but the facade's own loop thread).

        A Lamina still open when the interpreter exits is closed then (see ``_close_open``),
        but ``with Lamina(...) as ms:`` or an explicit ``close()`` is the way to say when.
        ``timeout``: seconds to wait for the close; on expiry TimeoutError is raised and the
        close goes on in the background."""
        with self._close_lock:
            if self._loop.is_closed():
                return
            _forget(self)
            if self._closing is None:
                self._closing = asyncio.run_coroutine_threadsafe(self._async.close(), self._loop)
            try:
                self._closing.result(timeout)
            except TimeoutError:
                raise TimeoutError(f"lamina did not close within {timeout:g} s") from None
            finally:
                if self._closing.done():
                    self._stop_loop()

    def __enter__(self) -> Lamina:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _cancel_the_rest() -> None:
    current = asyncio.current_task()
    rest = [task for task in asyncio.all_tasks() if task is not current]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


# -- Lamina facades still open at interpreter exit ------------------------------------------
#
# A script that forgets close() must still exit quietly and lose nothing. The hook runs with
# threading's own exit hooks, before the thread pools shut down (asyncio.to_thread, which the
# store and the embedder use, stops working after that, so a plain ``atexit`` hook is too
# late) and before daemon threads such as the facade's loop are frozen. One hook per process
# and a registry of open facades: close() takes its facade out of the registry.

#: Seconds the exit hook waits for each facade to close (background embeddings that did not
#: finish by then stay pending in the store: ``lamina memory embed-pending``).
EXIT_CLOSE_TIMEOUT = 60.0
_open: dict[int, Lamina] = {}
_open_guard = threading.Lock()
_hooked_pid: int | None = None


def _remember(ms: Lamina) -> None:
    global _hooked_pid
    with _open_guard:
        first = _hooked_pid != os.getpid()
        if first:  # the first facade of this process (a forked child drops its parent's)
            _open.clear()
            _hooked_pid = os.getpid()
        _open[id(ms)] = ms
    if not first:
        return
    hook = getattr(threading, "_register_atexit", None)
    try:
        if hook is None:
            raise RuntimeError("no threading exit hook")
        hook(_close_open)
    except RuntimeError:  # another Python, or the interpreter is already shutting down
        atexit.register(_close_open)


def _forget(ms: Lamina) -> None:
    with _open_guard:
        _open.pop(id(ms), None)


def _close_open() -> None:
    """Close every Lamina this process opened and did not close."""
    with _open_guard:
        if _hooked_pid != os.getpid():  # a forked child: the facades are its parent's
            _open.clear()
            return
        left = list(_open.values())
        _open.clear()
    for ms in left:
        try:
            ms.close(timeout=EXIT_CLOSE_TIMEOUT)
        except BaseException as exc:
            log.warning(
                "lamina could not close cleanly at exit (%s: %s); memories whose embedding "
                "was still pending stay pending (lamina memory embed-pending)",
                type(exc).__name__,
                exc,
            )
