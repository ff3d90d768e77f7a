"""The HTTP request metric: every HTTP request counted by route group and the status it was
answered with (0 when none was sent, as when the app raised), refusals included."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lamina.metrics import ServerMetrics
from lamina.server.middleware.request import group_of


class HttpMetrics:
    def __init__(self, app: ASGIApp, *, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        group = group_of(scope)  # before the app, which may change the scope's path
        status_seen: list[int] = []

        async def counted_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, counted_send)
        finally:
            status = str(status_seen[0] if status_seen else 0)
            self.metrics.http.labels(group, status).inc()
