"""The governance skill's tools: validate content against the policies in force at a layer,
score drift, list the policies."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from lamina.runtime import AsyncLamina
from lamina.server.tools.args import Args
from lamina.server.tools.base import Tool
from lamina.shapes import jsonable


class GovernanceValidate(Args):
    layer: str = "company"
    layer_id: str | None = None
    context: dict[str, Any] = Field(
        description="path, content, dependencies, imports and/or config to check."
    )


class GovernanceDrift(Args):
    layer: str = "company"
    layer_id: str | None = None
    contexts: list[dict[str, Any]]


class GovernancePolicies(Args):
    layer: str = "company"
    layer_id: str | None = None


async def governance_validate(ms: AsyncLamina, a: GovernanceValidate, t: str) -> Any:
    return jsonable(await ms.governance.validate(a.layer, a.context, a.layer_id, tenant_id=t))


async def governance_drift(ms: AsyncLamina, a: GovernanceDrift, t: str) -> Any:
    return jsonable(await ms.governance.drift(a.layer, a.contexts, a.layer_id, tenant_id=t))


async def governance_policies(ms: AsyncLamina, a: GovernancePolicies, t: str) -> Any:
    policies = await ms.governance.policies(a.layer, a.layer_id, tenant_id=t)
    return {"policies": jsonable(policies)}


GOVERNANCE_TOOLS: tuple[Tool[Any], ...] = (
    Tool(
        "governance_validate",
        "governance",
        "Check a file, dependencies, imports or config against the policies in force at a layer.",
        GovernanceValidate,
        governance_validate,
        read_only=True,
    ),
    Tool(
        "governance_drift",
        "governance",
        "Score how far contexts drift from a layer's policies (0 clean … 1).",
        GovernanceDrift,
        governance_drift,
        read_only=True,
    ),
    Tool(
        "governance_policies",
        "governance",
        "The policies in force at a layer, merged from the company down.",
        GovernancePolicies,
        governance_policies,
        read_only=True,
    ),
)
