"""The server page: health (each dependency up or down and how long its check took; no paths
or counts), the Prometheus figures that matter as small charts (requests, latency, errors,
rate-limit refusals; over time too), and the live threads with the tenant's latest tasks.

The figures are the whole server's, as ``/metrics`` shows them: an admin key sees them (and
so does everyone when no keys are configured); other keys see health and their own tasks."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.errors import LaminaError
from lamina.server.health import health, summary
from lamina.server.ui import charts
from lamina.server.ui.base import Inspector, Viewer

#: A2A TaskState numbers (a2a.types.TaskState) and how the page names them.
TASK_STATES = {
    0: "unspecified",
    1: "submitted",
    2: "working",
    3: "completed",
    4: "failed",
    5: "canceled",
    6: "input required",
    7: "rejected",
    8: "auth required",
}
FAMILIES = ("a2a_", "memory_")


#: How long a health report is shown before the checks run again (seconds): the checks
#: embed a text and read the repository, too slow to run on every page view.
HEALTH_TTL = 15.0


class Sampler:
    """Samples the registry's totals every ``history.interval`` seconds while the server
    runs, so the page can chart requests, server errors and refusals over time; and keeps
    the last health report for HEALTH_TTL seconds."""

    def __init__(self, ui: Inspector) -> None:
        self.ui = ui
        self.history = charts.History()
        self._task: asyncio.Task[None] | None = None
        self._health: tuple[float, datetime, dict[str, Any]] | None = None

    async def health(self) -> tuple[datetime, dict[str, Any]]:
        """The health summary (no paths or counts) and when it was checked."""
        now = time.monotonic()
        if self._health is None or now - self._health[0] > HEALTH_TTL:
            report = summary(await health(self.ui.ms, self.ui.threads.active))
            self._health = (now, datetime.now(UTC), report)
        return self._health[1], self._health[2]

    def sample(self) -> None:
        self.history.record(self.ui.ms.metrics.samples(*FAMILIES))

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.history.interval)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="lamina-ui-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def figures(ui: Inspector, sampler: Sampler) -> dict[str, Any]:
    samples = ui.ms.metrics.samples(*FAMILIES)
    sampler.history.record(samples)
    http = charts.by_label(samples, "a2a_http_requests_total", "route", "status")
    return {
        "line_charts": [
            charts.line_chart("HTTP requests per minute", sampler.history.rates(1)),
            charts.line_chart("Server errors (5xx) per minute", sampler.history.rates(2)),
            charts.line_chart("Rate-limit refusals per minute", sampler.history.rates(3)),
        ],
        "bar_charts": [
            charts.bar_chart(
                "HTTP requests by route / status",
                http.items(),
                bad=lambda label: label.rsplit(" / ", 1)[-1][:1] in ("4", "5"),
            ),
            charts.bar_chart(
                "Skill requests by skill / outcome",
                charts.by_label(samples, "a2a_requests_total", "skill", "outcome").items(),
            ),
            charts.bar_chart(
                "Skill latency, mean (ms)",
                charts.mean_latency_ms(samples, "a2a_request_latency_seconds", "skill").items(),
                unit="ms",
            ),
            charts.bar_chart(
                "Skill latency, p95 bucket (ms)",
                charts.quantile_ms(samples, "a2a_request_latency_seconds", "skill", 0.95).items(),
                unit="ms",
            ),
            charts.bar_chart(
                "Skill errors by skill / code",
                charts.by_label(samples, "a2a_errors_total", "skill", "code").items(),
                bad=lambda _: True,
            ),
            charts.bar_chart(
                "Rate-limit refusals by tenant / skill",
                charts.by_label(
                    samples, "a2a_rate_limit_hits_total", "tenant_id", "skill_name"
                ).items(),
                bad=lambda _: True,
            ),
            charts.bar_chart(
                "Memory operations, mean latency (ms)",
                charts.mean_latency_ms(
                    samples, "memory_operations_latency_seconds", "operation"
                ).items(),
                unit="ms",
            ),
            charts.bar_chart(
                "Memories stored per layer (all tenants)",
                charts.by_label(samples, "memory_storage_size", "layer").items(),
            ),
        ],
    }


async def _tasks(ui: Inspector, tenant: str) -> list[dict[str, Any]]:
    found, _ = await ui.threads.tasks.list(tenant, limit=10)
    return [
        {
            "id": t.task_id,
            "thread": t.context_id,
            "state": TASK_STATES.get(t.state, str(t.state)),
            "updated": datetime.fromtimestamp(t.updated_ns / 1e9, UTC) if t.updated_ns else None,
        }
        for t in found
    ]


async def server_page(ui: Inspector, viewer: Viewer, sampler: Sampler) -> Response:
    checked, report = await sampler.health()
    try:
        active: int | None = await ui.threads.active()
    except LaminaError:
        active = None
    context: dict[str, Any] = {
        "section": "server",
        "health": report,
        "checked": checked,
        "active_threads": active,
        "tasks": await _tasks(ui, viewer.tenant),
        "figures": figures(ui, sampler) if viewer.admin else None,
        "interval": sampler.history.interval,
    }
    return ui.render(viewer, "server.html", **context)


def routes(ui: Inspector) -> list[Route]:
    sampler = Sampler(ui)
    ui.background.append(sampler)

    async def page(ui: Inspector, request: Request, viewer: Viewer) -> Response:
        return await server_page(ui, viewer, sampler)

    return [ui.route("/server", page)]
