"""Bodies as strict JSON on the A2A routes (lamina.server.body): a POST body that is not, or
a query parameter that must be a whole number and is not, is refused the way the route
speaks (a JSON-RPC parse error, a 400). What was read goes in the scope
(``lamina.json``: the A2A adapter's direct path uses it, the body is not parsed twice)."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from lamina.server.body import BadBody, bad_query
from lamina.server.middleware.buffer import RequestBody
from lamina.server.middleware.refusal import refuse_unreadable
from lamina.server.middleware.request import (
    A2A_GROUPS,
    PARSED_JSON,
    PRINCIPAL,
    group_of,
    is_checked,
)

log = logging.getLogger("lamina.server")


class StrictJson:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if is_checked(scope):
            parsed = await RequestBody.of(scope).parsed()
            if group_of(scope) in A2A_GROUPS:
                bad = parsed.bad
                if bad is None and (query := bad_query(scope["query_string"])):
                    bad = BadBody(query)
                if bad is not None:
                    await self._refuse(scope, send, bad)
                    return
            scope[PARSED_JSON] = parsed.value
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, send: Send, bad: BadBody) -> None:
        tenant = scope[PRINCIPAL].tenant
        method, path = scope["method"], scope["path"]
        log.info("%s %s: unreadable body from tenant %s: %s", method, path, tenant, bad)
        await refuse_unreadable(scope, send, str(bad))
