"""``lamina serve --workers N``: N server processes on one address.

Each process gets a listening socket of its own, all bound to the same port with
``SO_REUSEPORT``, so the kernel spreads new connections over the processes (Linux: by a hash
of the connection). One socket shared by every process would not: the first process to wake
takes every connection waiting, and a client keeping a few connections open ends up with
all of them on one process (measured: 7 of 8). The processes open the same store; this
parent process only starts them, starts again one that dies, and stops them on SIGINT or
SIGTERM.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import secrets
import signal
import socket
import threading
import time
from multiprocessing.process import BaseProcess
from typing import Any

import click

from lamina.config import Settings
from lamina.errors import ErrorCode, LaminaError
from lamina.server.auth import tenants_served

log = logging.getLogger("lamina.server")

#: A process that dies this soon after it started is not started again (its app or
#: configuration is broken; every new one would die the same way).
_STARTUP_GRACE = 10.0
#: The exit code of a process whose app did not start: never started again.
_STARTUP_FAILURE = 3
_BACKLOG = 2048


def serve_workers(settings: Settings, log_level: str = "info") -> None:
    """Serve with ``server.workers`` processes. Threads, tasks and the inspector's sign-ins
    (one ``ui_secret``, made here when unset) are shared through the store; rate limits
    only through ``server.redis_url`` (without it, each process keeps its own windows)."""
    from lamina.server.app import check_bind
    from lamina.server.auth import KeyRing

    check_bind(settings.server.host, KeyRing(settings.server.api_keys))
    if not hasattr(socket, "SO_REUSEPORT"):
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            "server.workers above 1 needs SO_REUSEPORT (Linux); run one process per port "
            "behind a load balancer instead",
        )
    logging.getLogger("lamina").setLevel(log_level.upper())
    server = settings.server
    if server.ui_secret is None:  # one key for every process: a sign-in works on each
        server = server.model_copy(update={"ui_secret": secrets.token_urlsafe(32)})
    if server.redis_url is None:
        log.warning(
            "%d server processes without server.redis_url: each keeps its own rate-limit "
            "windows, so a tenant may get up to %d times its limit",
            server.workers,
            server.workers,
        )
    settings = settings.model_copy(update={"server": server})
    sockets = _listening(server.host, server.port, server.workers)
    port = sockets[0].getsockname()[1]
    click.echo(f"lamina A2A server on http://{server.host}:{port}/")
    click.echo(
        f"data directory {settings.data_dir}; database {settings.store_kind()} "
        f"{settings.database_location()}; {tenants_served(settings)}; "
        f"{server.workers} processes"
    )
    _Supervisor(settings.model_dump_json(), log_level, sockets).run()


def _listening(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` sockets listening on one port (``port`` 0: the one the first one got)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    out: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, kind, proto)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address if not out[:-1] else (address[0], port, *address[2:]))
            port = sock.getsockname()[1]
            # Listening now: a client that connects before the processes are up waits.
            sock.listen(_BACKLOG)
            sock.set_inheritable(True)
    except OSError:
        for sock in out:
            sock.close()
        raise
    return out


def _worker(
    settings_json: str, log_level: str, shared: tuple[Any, Any], sock: socket.socket
) -> None:
    """One server process: the app on its own socket, until uvicorn is told to stop;
    ``shared``: the query vectors every process keeps (``shared_queries.make_arena``)."""
    import uvicorn

    from lamina.runtime import AsyncLamina
    from lamina.server.app import LaminaServer
    from lamina.server.run import UVICORN_OPTIONS

    settings = Settings.model_validate_json(settings_json)
    logging.getLogger("lamina").setLevel(log_level.upper())
    ms = AsyncLamina(settings)
    ms.share_query_vectors(*shared)
    app = LaminaServer(ms, close_runtime=True).app
    config = uvicorn.Config(app, log_level=log_level, **UVICORN_OPTIONS)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    if not server.started:  # the app did not start (its store, its configuration)
        raise SystemExit(_STARTUP_FAILURE)


class _Supervisor:
    def __init__(self, settings_json: str, log_level: str, sockets: list[socket.socket]) -> None:
        self._sockets = sockets
        self._context = multiprocessing.get_context("spawn")
        from lamina.embeddings.shared_queries import make_arena

        # Query vectors embedded by one process serve the others (a restarted one too).
        self._args = (settings_json, log_level, make_arena(self._context))
        self._processes: list[BaseProcess | None] = [None] * len(sockets)
        self._started: list[float] = [0.0] * len(sockets)
        self._stop = threading.Event()
        self._failed = False

    def run(self) -> None:
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            for index in range(len(self._sockets)):
                self._start(index)
            while not self._stop.wait(0.5):
                self._keep_alive()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for sock in self._sockets:
                sock.close()
        if self._failed:
            raise SystemExit(1)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        log.info("received %s: stopping the server processes", signal.Signals(signum).name)
        self._stop.set()

    def _start(self, index: int) -> None:
        process = self._context.Process(
            target=_worker,
            args=(*self._args, self._sockets[index]),
            name=f"lamina-server-{index}",
        )
        process.start()
        self._processes[index] = process
        self._started[index] = time.monotonic()

    def _keep_alive(self) -> None:
        for index, process in enumerate(self._processes):
            if process is None or process.is_alive():
                continue
            early = time.monotonic() - self._started[index] < _STARTUP_GRACE
            if early or process.exitcode == _STARTUP_FAILURE:
                log.error(
                    "server process %s ended at start (exit code %s): stopping",
                    process.pid,
                    process.exitcode,
                )
                self._failed = True
                self._stop.set()
                return
            log.warning(
                "server process %s ended (exit code %s): starting another",
                process.pid,
                process.exitcode,
            )
            self._start(index)

    def _stop_all(self) -> None:
        running = [p for p in self._processes if p is not None and p.is_alive()]
        for process in running:
            if process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        for process in running:
            process.join(timeout=15)
            if process.is_alive():
                process.kill()
                process.join()
