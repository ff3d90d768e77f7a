"""get_session_context(): what a new thread starts with — the memories relevant to it and
the governance constraints in force where it works."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.runtime import AsyncLamina

#: Rules shown per policy (the built-in secrets policy alone has more).
MAX_RULES = 25


def _layer_of(identifiers: Mapping[str, str]) -> tuple[str, str | None]:
    for layer in ("project", "team", "org"):
        value = identifiers.get(f"{layer}_id")
        if value:
            return layer, value
    return "company", None


async def relevant_memories(
    ms: AsyncLamina, tenant: str, identifiers: Mapping[str, str], query: str, limit: int
) -> list[dict[str, Any]]:
    """A hybrid search across the layers the identifiers reach, as JSON-ready rows."""
    hits = await ms.memory.search(
        query[: ms.settings.memory.max_query_length],
        mode="hybrid",
        limit=limit,
        tenant_id=tenant,
        **identifiers,  # type: ignore[arg-type]
    )
    return [
        {
            "id": h.memory.id,
            "layer": h.memory.layer.value,
            "content": h.memory.content,
            "score": round(h.score, 4),
        }
        for h in hits
    ]


async def session_context(
    ms: AsyncLamina,
    tenant: str,
    identifiers: Mapping[str, str],
    query: str = "",
    *,
    limit: int = 5,
) -> dict[str, Any]:
    """Relevant memories (a search on ``query``, or the newest when there is none) across
    the layers the identifiers reach, and the active constraints: the merged policies of the
    most specific layer named (project, team, org, else company)."""
    ids = {k: v for k, v in identifiers.items() if v}
    memories: list[dict[str, Any]] = []
    note = ""
    if limit and ids:
        try:
            if query.strip():
                memories = await relevant_memories(ms, tenant, ids, query, limit)
            else:
                page = await ms.memory.list(limit=limit, tenant_id=tenant, **ids)  # type: ignore[arg-type]
                memories = [
                    {"id": m.id, "layer": m.layer.value, "content": m.content} for m in page.items
                ]
        except LaminaError as exc:
            if exc.code not in (ErrorCode.MISSING_IDENTIFIER, ErrorCode.INVALID_ARGUMENT):
                raise
            note = exc.message
    elif not ids:
        note = "no identifiers given (message metadata user_id, project_id, ...): no memories"
    layer, layer_id = _layer_of(ids)
    constraints = []
    for policy in await ms.governance.policies(layer, layer_id, tenant_id=tenant):
        rules = [
            f"{r.severity.value} {r.type.value} {r.target.value} {r.operator.value}"
            + (f" {r.value!r}" if r.value and not policy.id.startswith("builtin-") else "")
            + (f": {r.message}" if r.message else "")
            for r in policy.rules[:MAX_RULES]
        ]
        constraints.append(
            {
                "policy_id": policy.id,
                "name": policy.name,
                "layer": policy.layer,
                "mode": policy.mode.value,
                "rules": rules,
                "rule_count": len(policy.rules),
            }
        )
    out: dict[str, Any] = {
        "identifiers": ids,
        "memories": memories,
        "constraints": constraints,
        "constraints_layer": {"layer": layer, "layer_id": layer_id},
    }
    if note:
        out["note"] = note
    return out
