"""Rate limits per tenant and per tenant and skill, by the key's tier: a request over one is
refused with 429 and a Retry-After, named in the message and counted in
``a2a_rate_limit_hits_total``. ``/metrics`` is not limited."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from lamina.metrics import ServerMetrics
from lamina.server.auth import Principal
from lamina.server.middleware.buffer import RequestBody
from lamina.server.middleware.refusal import Refusal, refuse
from lamina.server.middleware.request import PRINCIPAL, is_checked
from lamina.server.ratelimit import Limited, RateLimiter

# An implementation-defined server error: A2A names none for a rate limit.
RATE_LIMITED_CODE = -32092


def _parts(body: Any) -> list[Any]:
    if not isinstance(body, dict):
        return []
    holder = body.get("params") if isinstance(body.get("params"), dict) else body
    message = holder.get("message") if isinstance(holder, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    return parts if isinstance(parts, list) else []


def _mcp_tool(body: Any) -> str | None:
    """The tool an MCP ``tools/call`` request (or the first of a batch) names."""
    for message in body if isinstance(body, list) else [body]:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if isinstance(name, str):
                return name
    return None


def skill_of(body: Any, skill_for_tool: Callable[[str], str]) -> str:
    """The skill a request body (its JSON value) asks for: the tool's skill (an A2A data
    part's, or an MCP ``tools/call``'s), "search" for free text, "tasks" for everything else
    (GetTask, ListTasks, CancelTask, MCP's initialize and tools/list, ...)."""
    tool = _mcp_tool(body)
    if tool is not None:
        return skill_for_tool(tool)
    parts = _parts(body)
    for part in parts:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and isinstance(data.get("tool"), str):
            return skill_for_tool(data["tool"])
    return "search" if parts else "tasks"


def rate_limited(limited: Limited, tier: str, skill: str) -> Refusal:
    wait = int(limited.retry_after)
    if limited.scope == "total":
        what = f"{limited.limit} requests per minute for all of the tenant's requests"
    else:
        what = f"{limited.limit} requests per minute for skill {skill!r}"
    message = f"rate limit of tier {tier!r} reached: {what}; retry in {wait} s"
    return Refusal(
        429,
        "RATE_LIMITED",
        RATE_LIMITED_CODE,
        "RESOURCE_EXHAUSTED",
        message,
        data={
            "limit": limited.scope,
            "requestsPerMinute": limited.limit,
            "skill": skill,
            "retryAfterSeconds": wait,
        },
        headers={"retry-after": str(wait)},
    )


class RateLimit:
    def __init__(
        self,
        app: ASGIApp,
        *,
        limiter: RateLimiter,
        metrics: ServerMetrics,
        skill_for_tool: Callable[[str], str],
    ) -> None:
        self.app = app
        self.limiter = limiter
        self.metrics = metrics
        self.skill_for_tool = skill_for_tool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if is_checked(scope) and scope["path"] != "/metrics":
            principal: Principal = scope[PRINCIPAL]
            parsed = await RequestBody.of(scope).parsed()
            skill = skill_of(parsed.value, self.skill_for_tool)
            limited = await self.limiter.check(principal.tenant, principal.tier, skill)
            if limited is not None:
                self.metrics.rate_limited.labels(principal.tenant, skill).inc()
                await refuse(scope, send, rate_limited(limited, principal.tier, skill))
                return
        await self.app(scope, receive, send)
