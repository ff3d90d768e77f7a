"""The MCP adapter: the same tools as the A2A server, as the official mcp SDK's tool list and
tool calls (lamina.server.mcp_server serves them over stdio or streamable HTTP)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import mcp.types as types
from mcp.server import ServerRequestContext

from lamina.errors import ErrorCode, LaminaError
from lamina.metrics import ServerMetrics
from lamina.runtime import AsyncLamina
from lamina.server.adapter import ToolSurface
from lamina.server.defaults import IdentifierDefaults
from lamina.server.tools import ServerTool, all_tools
from lamina.server.tools.registry import ToolRegistry

log = logging.getLogger("lamina.server")


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

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[self.native(t) for t in self.registry.all()])

    async def call_tool(
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
