"""Rate limits per tenant and per skill: the request over one gets 429 with Retry-After in
the route's protocol, names the limit, and is counted by tenant and skill; the skill is the
tool's (an A2A data part's or an MCP tools/call's); /metrics is not limited."""

from __future__ import annotations

from starlette.middleware import Middleware

from lamina.metrics import Metrics
from lamina.server.auth import KeyRing
from lamina.server.middleware import ApiKeys, BodyLimit, BufferBody, RateLimit
from lamina.server.ratelimit import RateLimiter
from tests.server.middleware.support import TOOL_SKILLS, auth, call, rpc, seen, settings, stack


class Limited:
    """Keys, body and rate limit, with the metrics they count in."""

    def __init__(self, **tiers: object) -> None:
        config = settings(**tiers)
        self.registry = Metrics()
        self.app = stack(
            Middleware(BufferBody, max_bytes=1000),
            Middleware(ApiKeys, keys=KeyRing(config.api_keys), default_tenant="solo"),
            Middleware(BodyLimit),
            Middleware(
                RateLimit,
                limiter=RateLimiter(config),
                metrics=self.registry.server(),
                skill_for_tool=lambda tool: TOOL_SKILLS.get(tool, "knowledge"),
            ),
        )

    def hits(self, tenant: str, skill: str) -> float:
        return sum(
            s.value
            for s in self.registry.samples("a2a_rate_limit_hits")
            if s.name == "a2a_rate_limit_hits_total"
            and s.labels == {"tenant_id": tenant, "skill_name": skill}
        )


def test_the_tenant_s_total_limit_gives_429_with_retry_after() -> None:
    gate = Limited(busy={"requests_per_minute": 2})
    for n in range(2):
        seen(call(gate.app, "POST", "/", json=rpc(n), headers=auth("busy")))
    refused = call(gate.app, "POST", "/", json=rpc("third"), headers=auth("busy"))
    assert refused.status_code == 429
    wait = int(refused.headers["retry-after"])
    assert 1 <= wait <= 60
    envelope = refused.json()
    assert envelope["id"] == "third" and envelope["error"]["code"] == -32092
    assert envelope["error"]["data"] == {
        "reason": "RATE_LIMITED",
        "limit": "total",
        "requestsPerMinute": 2,
        "skill": "search",
        "retryAfterSeconds": wait,
    }
    assert envelope["error"]["message"] == (
        "rate limit of tier 'busy' reached: 2 requests per minute for all of the tenant's "
        f"requests; retry in {wait} s"
    )
    assert gate.hits("busy", "search") == 1
    # Another tenant is not slowed down.
    seen(call(gate.app, "POST", "/", json=rpc(), headers=auth("acme")))


def test_a_skill_limit_names_the_skill_of_the_tool() -> None:
    gate = Limited(busy={"requests_per_minute": 100, "skills": {"governance": 1, "memory": 1}})
    busy = auth("busy")
    seen(call(gate.app, "POST", "/message:send", json=rpc(1, "policy_check"), headers=busy))
    refused = call(gate.app, "POST", "/message:send", json=rpc(2, "policy_check"), headers=busy)
    assert refused.status_code == 429
    metadata = refused.json()["error"]["details"][0]["metadata"]
    assert (metadata["limit"], metadata["skill"]) == ("skill", "governance")
    params = {"name": "memory_add", "arguments": {}}
    tool_call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    seen(call(gate.app, "POST", "/mcp", json=[tool_call], headers=busy))
    again = call(gate.app, "POST", "/mcp", json=tool_call, headers=busy)
    assert again.status_code == 429 and again.json()["error"]["details"]["skill"] == "memory"
    assert (gate.hits("busy", "governance"), gate.hits("busy", "memory")) == (1, 1)


def test_metrics_are_not_limited() -> None:
    gate = Limited(admin={"requests_per_minute": 1})
    for _ in range(3):
        assert seen(call(gate.app, "GET", "/metrics", headers=auth("root")))["tier"] == "admin"
