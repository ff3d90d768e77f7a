"""The MCP server over stdio (one local client, the configured tenant) or streamable HTTP at
/mcp (API keys, rate limits and the loopback rule exactly as ``lamina serve``), through the
official mcp SDK, started by lamina.server.mcp_stdio (which answers a stdio client's first
``initialize`` before this module is imported). Over stdio it serves at once: the runtime
(lamina's heavier imports, the store, the embedding model) starts meanwhile and a tool call
waits for it. With lamina.server.mcp_adapter, the only modules importing mcp."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from importlib import import_module
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING, Any, cast

import click
from mcp.server import Server

from lamina.config import Settings
from lamina.server.defaults import IdentifierDefaults, instructions

if TYPE_CHECKING:
    from lamina.runtime import AsyncLamina
    from lamina.server.mcp_adapter import MCPAdapter


Handler = Callable[[Any, Any], Awaitable[Any]]


def new_server(
    defaults: IdentifierDefaults, list_tools: Handler, call_tool: Handler
) -> Server[Any]:
    """The SDK's low-level server: lamina's name, version and instructions, these handlers."""
    return Server(
        "lamina",
        version=package_version("lamina"),
        instructions=instructions(defaults),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_http(settings: Settings, defaults: IdentifierDefaults) -> None:
    """Serve MCP over streamable HTTP at /mcp, behind the gate of ``lamina serve``."""
    from lamina.runtime import AsyncLamina
    from lamina.server.auth import KeyRing
    from lamina.server.mcp_adapter import MCPAdapter

    ms = AsyncLamina(settings)
    try:
        adapter = MCPAdapter(ms, defaults=defaults)
        await ms.start()
        from lamina.server.app import check_bind, gate_middleware
        from lamina.server.middleware import wrap
        from lamina.server.ratelimit import RateLimiter
        from lamina.server.run import serve_app

        keys = KeyRing(settings.server.api_keys)
        check_bind(settings.server.host, keys)
        server = new_server(defaults, adapter.list_tools, adapter.call_tool)
        app = server.streamable_http_app(host=settings.server.host)
        limiter = RateLimiter(settings.server)
        gate = gate_middleware(
            keys=keys,
            default_tenant=settings.tenant_id,
            limiter=limiter,
            metrics=adapter.metrics,
            max_body=settings.server.max_body_bytes,
            skill_for_tool=adapter.registry.skill_of,
        )
        try:
            await serve_app(
                wrap(app, gate),
                settings.server.host,
                settings.server.port,
                "warning",
                "lamina MCP server (streamable HTTP at /mcp) on",
                settings,
            )
        finally:
            await limiter.aclose()
    finally:
        await ms.close()


def _load(settings: Settings) -> None:
    """lamina's heavier imports, the local embedding model loading beside them on its own
    thread (building the model's session releases the GIL: the second core)."""
    from lamina.embeddings import preload

    preload(settings.embedding)
    import_module("lamina.server.mcp_adapter")


async def _start(ms: AsyncLamina) -> None:
    """Open the store (migrations) and say so."""
    await ms.start()
    settings = ms.settings
    # stdout carries the protocol; clients show stderr in their MCP logs.
    click.echo(
        f"lamina MCP server (stdio): data directory {settings.data_dir}; database "
        f"{settings.store_kind()} {settings.database_location()}",
        err=True,
    )


async def serve_stdio(
    settings: Settings,
    defaults: IdentifierDefaults,
    *,
    stdin: AsyncIterator[str] | None = None,
    stdout: Any = None,
) -> None:
    """Serve over stdio (the process's, or ``stdin`` and ``stdout``: lamina.server.mcp_stdio)
    while the runtime starts (imports, the embedding model, the store):
    ``initialize`` needs none of it, ``tools/list`` waits for the runtime to be built and a
    tool call for the store too (``MCPAdapter.call_tool``). A start failure stops the server
    and is raised as it is, as when the store was opened before serving."""
    from mcp.server.stdio import stdio_server

    built: asyncio.Future[MCPAdapter] = asyncio.get_running_loop().create_future()

    async def list_tools(ctx: Any, params: Any) -> Any:
        return await (await asyncio.shield(built)).list_tools(ctx, params)

    async def call_tool(ctx: Any, params: Any) -> Any:
        return await (await asyncio.shield(built)).call_tool(ctx, params)

    server = new_server(defaults, list_tools, call_tool)

    async def serve() -> None:
        # the SDK reads lines from an async iterable and writes to an object with async
        # write and flush: an anyio file of its own when none are given
        async with stdio_server(cast(Any, stdin), cast(Any, stdout)) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    async def start() -> None:
        # in a thread: the event loop answers initialize meanwhile
        await asyncio.to_thread(_load, settings)
        from lamina.runtime import AsyncLamina
        from lamina.server.mcp_adapter import MCPAdapter

        built.set_result(MCPAdapter(AsyncLamina(settings), defaults=defaults))
        await _start(built.result().ms)

    serving = asyncio.create_task(serve(), name="lamina-mcp-stdio")
    starting = asyncio.create_task(start(), name="lamina-mcp-start")
    try:
        await asyncio.wait({serving, starting}, return_when=asyncio.FIRST_EXCEPTION)
        if starting.done() and starting.exception() is not None:
            serving.cancel()
            with suppress(asyncio.CancelledError):
                await serving
        await starting  # its failure, as it is
        await serving
    finally:
        for task in (serving, starting):
            task.cancel()
        await asyncio.gather(serving, starting, return_exceptions=True)
        if built.done() and not built.cancelled():
            await built.result().ms.close()
        built.cancel()
