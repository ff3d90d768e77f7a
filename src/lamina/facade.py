"""``Lamina``: lamina for blocking code, a thin facade running AsyncLamina on a loop of its
own; and the exit hook that closes the facades a process left open."""

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
from collections.abc import Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, Unpack

from lamina.config import Settings
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.service import MemoryService
from lamina.runtime import AsyncLamina, RuntimeOptions

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger(__name__)


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
    add_messages = _bridge(MemoryService.add_messages)
    add_messages_bulk = _bridge(MemoryService.add_messages_bulk)
    search = _bridge(MemoryService.search)
    get = _bridge(MemoryService.get)
    update = _bridge(MemoryService.update)
    delete = _bridge(MemoryService.delete)
    bulk_delete = _bridge(MemoryService.bulk_delete)
    delete_all = _bridge(MemoryService.delete_all)
    count_all = _bridge(MemoryService.count_all)
    forget = _bridge(MemoryService.forget)
    import_ = _bridge(MemoryService.import_)
    list = _bridge(MemoryService.list)
    list_all = _bridge(MemoryService.list_all)
    owners = _bridge(MemoryService.owners)
    count_by_layer = _bridge(MemoryService.count_by_layer)
    history = _bridge(MemoryService.history)
    invalidate = _bridge(MemoryService.invalidate)
    purge_expired = _bridge(MemoryService.purge_expired)
    embed_pending = _bridge(MemoryService.embed_pending)
    flush_embeddings = _bridge(MemoryService.flush_embeddings)
    reembed = _bridge(MemoryService.reembed)
    embedding_status = _bridge(MemoryService.embedding_status)
    register_hierarchy = _bridge(MemoryService.register_hierarchy)

    def export(self, /, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """As ``MemoryService.export`` (the same arguments): the records, read a page at a
        time on the facade's loop."""
        pages = self._service.export_pages(**kwargs)

        async def next_page() -> list[dict[str, Any]] | None:
            try:
                return await anext(pages)
            except StopAsyncIteration:
                return None

        try:
            while (page := self._runner(next_page())) is not None:
                yield from page
        finally:
            self._runner(pages.aclose())

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

    def __init__(self, settings: Settings | None = None, **options: Unpack[RuntimeOptions]) -> None:
        """The options of AsyncLamina (lamina.runtime.RuntimeOptions)."""
        self._async = AsyncLamina(settings, **options)
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
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop, on the facade's own thread, that runs the AsyncLamina's work."""
        return self._loop

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
