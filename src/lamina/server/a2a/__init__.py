"""The A2A adapter: the only code that imports the a2a SDK (pinned in pyproject.toml and
CHANGELOG.md). It maps the skills runtime (server/skills.py) to A2A 1.0 — card, JSON-RPC,
HTTP+JSON, SSE, 0.3 compatibility — plus the 0.1 legacy routes. Replacing the SDK means
replacing this package only."""

from __future__ import annotations

import hashlib
import json
import time
from email.utils import formatdate
from typing import Any

from a2a.auth.user import User
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.common import ServerCallContextBuilder
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from lamina.runtime import AsyncLamina
from lamina.server.a2a.card import SPEC_VERSION, CardBuilder
from lamina.server.a2a.direct import DirectCalls, one_shot
from lamina.server.a2a.executor import LaminaExecutor, ThreadContextBuilder
from lamina.server.a2a.faults import quiet_client_faults
from lamina.server.a2a.legacy import legacy_routes
from lamina.server.a2a.numbers import WRITTEN_WHOLE
from lamina.server.a2a.store import StoreTaskStore
from lamina.server.adapter import ToolSurface
from lamina.server.skills import Dispatcher
from lamina.server.tools import ServerTool
from lamina.server.tools.registry import describe

#: Seconds a client may keep the agent card without asking again.
CARD_MAX_AGE = 300

__all__ = ["SPEC_VERSION", "A2AAdapter"]


class _TenantUser(User):
    def __init__(self, tenant: str) -> None:
        self._tenant = tenant

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._tenant


class _ContextBuilder(ServerCallContextBuilder):
    """The call context of a request the HTTP gate let through: its tenant, never one the
    client names."""

    def build(self, request: Request) -> ServerCallContext:
        principal = request.scope["lamina.principal"]
        return ServerCallContext(
            user=_TenantUser(principal.tenant),
            state={
                "headers": dict(request.headers),
                "lamina.tenant": principal.tenant,
                "lamina.tier": principal.tier,
            },
            requested_extensions=get_requested_extensions(
                request.headers.getlist(HTTP_EXTENSION_HEADER)
            ),
        )


class A2AAdapter(ToolSurface):
    def __init__(
        self,
        ms: AsyncLamina,
        dispatcher: Dispatcher,
        *,
        url: str,
        auth: bool,
        version: str,
        fixed_url: bool = False,
    ) -> None:
        super().__init__(ms, dispatcher.registry)
        self.dispatcher = dispatcher
        self.cards = CardBuilder(
            dispatcher.registry, url, auth=auth, version=version, fixed=fixed_url
        )
        tasks = StoreTaskStore(dispatcher.threads.tasks)
        self.handler = DefaultRequestHandler(
            agent_executor=LaminaExecutor(dispatcher),
            task_store=tasks,
            agent_card=self.cards.card(),
            request_context_builder=ThreadContextBuilder(dispatcher, tasks),
        )
        self._contexts = _ContextBuilder()
        self.direct = DirectCalls(dispatcher, tasks)
        quiet_client_faults()

    def native(self, tool: ServerTool) -> Any:
        return describe([tool])[0]

    def routes(self) -> list[BaseRoute]:
        started = formatdate(time.time(), usegmt=True)

        async def agent_card(request: Request) -> Response:
            """The card, cacheable for five minutes and revalidated by its ETag (it changes
            only when tools are registered or the server restarts)."""
            card = MessageToDict(self.cards.card(str(request.base_url)))
            body = json.dumps(card, separators=(",", ":"), sort_keys=True).encode()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            headers = {
                "Cache-Control": f"public, max-age={CARD_MAX_AGE}",
                "ETag": etag,
                "Last-Modified": started,
            }
            if etag in request.headers.get("if-none-match", ""):
                return Response(status_code=304, headers=headers)
            return Response(body, media_type="application/json", headers=headers)

        routes: list[BaseRoute] = [
            Route("/.well-known/agent-card.json", agent_card, methods=["GET"])
        ]
        routes.extend(legacy_routes(self.handler, self._contexts.build))
        (sdk_jsonrpc,) = create_jsonrpc_routes(
            self.handler, "/", context_builder=self._contexts, enable_v0_3_compat=True
        )
        sdk_endpoint = sdk_jsonrpc.endpoint

        async def jsonrpc(request: Request) -> Response:
            """One-shot tool calls by the direct path, everything else by the SDK."""
            body: Any = request.scope.get("lamina.json")
            message = one_shot(body, request.headers)
            if message is None:
                response: Response = await sdk_endpoint(request)
                return response
            tenant = request.scope["lamina.principal"].tenant
            answer = await self.direct.answer(body["id"], message, tenant)
            # A result has its whole numbers written already; an error has the SDK's form.
            request.scope[WRITTEN_WHOLE] = answer.startswith(b'{"result"')
            return Response(answer, media_type="application/json")

        routes.append(Route("/", jsonrpc, methods=["POST"]))
        routes.extend(
            create_rest_routes(
                self.handler, context_builder=self._contexts, enable_v0_3_compat=True
            )
        )
        return routes

    async def aclose(self) -> None:
        await self.handler.aclose()
