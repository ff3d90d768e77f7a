"""API keys → tenants: a request with no key or a wrong one is refused with 401 (when keys
are configured), ``/metrics`` needs a key of tier admin (403). The caller's principal goes in
the scope (``lamina.principal``; the configured tenant when no keys are set). The public
health check tells what is behind it only to an admin key, or when no keys are set
(``lamina.health_detail``)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from lamina.server.auth import KeyRing, Principal, presented_key
from lamina.server.middleware.refusal import Refusal, refuse
from lamina.server.middleware.request import (
    HEALTH_DETAIL,
    PRINCIPAL,
    headers_of,
    is_checked,
    is_public,
)

# JSON-RPC code of a missing or wrong key: A2A names no error for it, so an
# implementation-defined server error, at the far end of -32000..-32099 from A2A's own.
UNAUTHENTICATED_CODE = -32090

UNAUTHENTICATED = Refusal(
    401,
    "UNAUTHORIZED",
    UNAUTHENTICATED_CODE,
    "UNAUTHENTICATED",
    "a valid API key is required: Authorization: Bearer <key> or X-API-Key: <key>",
    headers={"www-authenticate": 'Bearer realm="lamina"'},
)
METRICS_NEED_ADMIN = Refusal(
    403, "UNAUTHORIZED", 0, "PERMISSION_DENIED", "/metrics needs a key of tier admin"
)


class ApiKeys:
    def __init__(self, app: ASGIApp, *, keys: KeyRing, default_tenant: str) -> None:
        self.app = app
        self.keys = keys
        self.default = Principal(default_tenant, "default")

    def _caller(self, scope: Scope) -> Principal | None:
        headers = headers_of(scope)
        key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
        return self.keys.resolve(key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_public(scope) and scope["path"] == "/health":
            caller = self._caller(scope) if self.keys.enabled else None
            scope[HEALTH_DETAIL] = not self.keys.enabled or (
                caller is not None and caller.tier == "admin"
            )
        if not is_checked(scope):
            await self.app(scope, receive, send)
            return
        principal = self.default
        if self.keys.enabled:
            found = self._caller(scope)
            if found is None:
                await refuse(scope, send, UNAUTHENTICATED)
                return
            if scope["path"] == "/metrics" and found.tier != "admin":
                await refuse(scope, send, METRICS_NEED_ADMIN)
                return
            principal = found
        scope[PRINCIPAL] = principal
        await self.app(scope, receive, send)
