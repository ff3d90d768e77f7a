"""The MCP adapter: the same tools as the A2A server, through the official mcp SDK, over
stdio (one local client, the configured tenant) or streamable HTTP at /mcp (API keys, rate
limits and the loopback rule exactly as ``lamina serve``). The only module importing mcp."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import suppress
from importlib.metadata import version as package_version
from typing import Any

import click
import mcp.types as types
from mcp.server import Server, ServerRequestContext

from lamina.config import Settings
from lamina.embeddings import preload
from lamina.errors import ErrorCode, LaminaError
from lamina.metrics import ServerMetrics
from lamina.runtime import AsyncLamina
from lamina.server.adapter import ToolSurface
from lamina.server.auth import KeyRing
from lamina.server.defaults import IdentifierDefaults
from lamina.server.skills import ToolRegistry
from lamina.server.tools import ServerTool, all_tools

log = logging.getLogger("lamina.server")


def _instructions(defaults: IdentifierDefaults) -> str:
    text = (
        "Layered long-term memory, knowledge and governance. "
        "Identifiers (user_id, project_id, ...) scope memory tools."
    )
    if defaults:
        text += (
            f" This server fills in {defaults.describe()} when a memory tool call omits "
            "them (memory_delete_all: user_id only; each tool's description says which): "
            "leave them out unless you mean someone or something else, pass null for none."
        )
    return text


class MCPAdapter(ToolSurface):
    def __init__(
        self,
        ms: AsyncLamina,
        metrics: ServerMetrics | None = None,
        defaults: IdentifierDefaults | None = None,
    ) -> None:
        super().__init__(ms, ToolRegistry(all_tools(ms)))
        self.metrics = metrics or ms.metrics.server()
        if defaults is None:
            defaults = IdentifierDefaults(ms.settings.mcp.identifiers())
        #: Identifiers filled into tool calls that omit them (default: the ``mcp`` settings).
        self.defaults = defaults
        self.server: Server[Any] = Server(
            "lamina",
            version=package_version("lamina"),
            instructions=_instructions(self.defaults),
            on_list_tools=self._list,
            on_call_tool=self._call,
        )

    def native(self, tool: ServerTool) -> types.Tool:
        return types.Tool(
            name=tool.name,
            description=self.defaults.description(tool),
            input_schema=self.defaults.schema(tool),
            annotations=types.ToolAnnotations(read_only_hint=tool.read_only),
        )

    def _tenant(self, ctx: ServerRequestContext[Any, Any]) -> str:
        request = ctx.request
        scope = getattr(request, "scope", None)
        if isinstance(scope, dict) and "lamina.principal" in scope:
            return str(scope["lamina.principal"].tenant)
        return self.ms.settings.tenant_id

    async def _list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[self.native(t) for t in self.registry.all()])

    async def _call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        started = time.perf_counter()
        skill, state = self.registry.skill_of(params.name), "completed"
        try:
            await self.ms.start()  # the store opens beside serving (run_mcp): wait for it
            tool = self.registry.get(params.name)
            arguments = self.defaults.fill(tool, params.arguments or {})
            result = await tool.run(arguments, self._tenant(ctx))
            payload: dict[str, Any] = result if isinstance(result, dict) else {"result": result}
            error = False
        except LaminaError as exc:
            if exc.code is ErrorCode.INTERNAL_ERROR:
                exc = LaminaError(ErrorCode.INTERNAL_ERROR, "internal error (see the log)")
            payload, error, state = {"error": exc.to_dict()}, True, "rejected"
            self.metrics.errors.labels(skill, exc.code.value).inc()
        except Exception:
            log.exception("unexpected error in MCP tool %s", params.name)
            payload = {"error": {"code": "INTERNAL_ERROR", "message": "internal error"}}
            error, state = True, "failed"
            self.metrics.errors.labels(skill, "INTERNAL_ERROR").inc()
        self.metrics.requests.labels(skill, params.name, state).inc()
        self.metrics.latency.labels(skill).observe(time.perf_counter() - started)
        text = json.dumps(payload, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=payload,
            is_error=error,
        )


async def run_mcp(settings: Settings, transport: str) -> None:
    defaults = IdentifierDefaults(settings.mcp.identifiers())  # bad values fail before start
    ms = AsyncLamina(settings)
    try:
        adapter = MCPAdapter(ms, defaults=defaults)
        if transport == "stdio":
            await serve_stdio(adapter)
            return
        await ms.start()
        from lamina.server.app import check_bind, gate_middleware
        from lamina.server.middleware import wrap
        from lamina.server.ratelimit import RateLimiter
        from lamina.server.run import serve_app

        keys = KeyRing(settings.server.api_keys)
        check_bind(settings.server.host, keys)
        app = adapter.server.streamable_http_app(host=settings.server.host)
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


async def _start(ms: AsyncLamina) -> None:
    """Open the store (migrations), say so, then load the local embedding model in the
    background, so that the first tool call pays for neither."""
    await ms.start()
    settings = ms.settings
    # stdout carries the protocol; clients show stderr in their MCP logs.
    click.echo(
        f"lamina MCP server (stdio): data directory {settings.data_dir}; database "
        f"{settings.store_kind()} {settings.database_location()}",
        err=True,
    )
    preload(settings.embedding)


async def serve_stdio(adapter: MCPAdapter) -> None:
    """Serve over stdio while the runtime starts: ``initialize`` and ``tools/list`` need no
    store, and a tool call waits for it (``MCPAdapter._call``). A start failure stops the
    server and is raised as it is, as when the store was opened before serving."""
    from mcp.server.stdio import stdio_server

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await adapter.server.run(read, write, adapter.server.create_initialization_options())

    serving = asyncio.create_task(serve(), name="lamina-mcp-stdio")
    starting = asyncio.create_task(_start(adapter.ms), name="lamina-mcp-start")
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
