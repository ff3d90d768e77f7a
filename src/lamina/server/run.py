"""Running the servers under uvicorn (used by the CLI)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

import click
import uvicorn

from lamina.config import Settings
from lamina.runtime import AsyncLamina
from lamina.server.app import LaminaServer, check_bind
from lamina.server.auth import tenants_served

log = logging.getLogger("lamina.server")

#: How lamina's servers run under uvicorn (``serve_app``, and each process of ``lamina serve
#: --workers``): the app's lifespan on, no access log, five seconds for the requests in
#: flight at shutdown.
UVICORN_OPTIONS: dict[str, Any] = {
    "lifespan": "on",
    "access_log": False,
    "timeout_graceful_shutdown": 5,
}


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop's event loop when it is installed (the ``server`` extra), as
    uvicorn does for each process of ``lamina serve --workers``; else on asyncio's."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main)


async def serve_app(
    app: object, host: str, port: int, log_level: str, banner: str, settings: Settings
) -> None:
    """Serve ``app``; once listening, print the URL, then where the data is."""
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level=log_level,
        **UVICORN_OPTIONS,
    )
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.02)
        sockets = [s for srv in server.servers for s in (srv.sockets or [])]
        bound = sockets[0].getsockname()[1] if sockets else port
        click.echo(f"{banner} http://{host}:{bound}/")
        click.echo(
            f"data directory {settings.data_dir}; database {settings.store_kind()} "
            f"{settings.database_location()}; {tenants_served(settings)}"
        )

    watcher = asyncio.create_task(announce())
    try:
        await server.serve()
    finally:
        watcher.cancel()
    if not server.started:
        raise SystemExit(1)


async def run_a2a(settings: Settings, log_level: str = "info") -> None:
    from lamina.server.auth import KeyRing

    check_bind(settings.server.host, KeyRing(settings.server.api_keys))
    logging.getLogger("lamina").setLevel(log_level.upper())
    ms = AsyncLamina(settings)
    try:
        server = LaminaServer(ms)
        await serve_app(
            server.app,
            settings.server.host,
            settings.server.port,
            log_level,
            "lamina A2A server on",
            settings,
        )
    finally:
        await ms.close()
