"""The tools the server (and any other adapter: A2A, MCP) exposes, grouped into skills:
memory, knowledge, governance. Each tool has a name, a description, a JSON input schema, and
a handler that runs it for one tenant. Nothing here knows about A2A or MCP.

Arguments are validated against the tool's model: a missing required argument raises
INVALID_ARGUMENT with ``details["missing"]`` (an adapter asks for it: input-required); any
other bad argument raises INVALID_ARGUMENT naming the field (rejected). The tools' models
are strict (memory_args.py): a value of another JSON type is never converted, and its error
says the type it got (``details["got"]``), never the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from lamina.errors import ErrorCode, LaminaError
from lamina.runtime import AsyncLamina
from lamina.server.knowledge_args import (
    GovernanceDrift,
    GovernancePolicies,
    GovernanceValidate,
    KnowledgeContent,
    KnowledgeCreate,
    KnowledgeGet,
    KnowledgeHistory,
    KnowledgeQuery,
    KnowledgeStatusArgs,
    KnowledgeUpdate,
)
from lamina.server.memory_args import (
    MemoryAdd,
    MemoryAddMessages,
    MemoryId,
    MemoryInvalidate,
    MemoryList,
    MemorySearch,
    MemoryUpdate,
)
from lamina.server.memory_tools import Handler, lifecycle_tools
from lamina.shapes import jsonable


def json_kind(value: object) -> str:
    """What ``value`` is in JSON words (``a string``), for an error message that names the
    type a caller sent without echoing the value (it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


@dataclass(frozen=True)
class ServerTool:
    name: str
    skill: str
    description: str
    model: type[BaseModel]
    handler: Handler
    read_only: bool

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        return schema

    def parse(self, arguments: object) -> BaseModel:
        if not isinstance(arguments, Mapping):
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"{self.name}: arguments must be a JSON object",
                details={"tool": self.name},
            )
        try:
            return self.model.model_validate(dict(arguments))
        except ValidationError as exc:
            errors = exc.errors()
            missing = [".".join(str(p) for p in e["loc"]) for e in errors if e["type"] == "missing"]
            if missing and len(missing) == len(errors):
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"{self.name}: missing argument(s): {', '.join(missing)}",
                    details={"tool": self.name, "missing": missing},
                ) from None
            first = next(e for e in errors if e["type"] != "missing")
            where = ".".join(str(p) for p in first["loc"])
            details: dict[str, Any] = {"tool": self.name, "field": where}
            message = f"{self.name}: argument {where}: {first['msg']}"
            if first["type"].endswith("_type"):  # a value of another JSON type
                details["got"] = json_kind(first["input"])
                message += f" (got {details['got']})"
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details) from None

    async def run(self, arguments: object, tenant: str) -> Any:
        return await self.handler(self.parse(arguments), tenant)


def build_tools(ms: AsyncLamina) -> list[ServerTool]:
    """Every tool of the memory, knowledge and governance skills, bound to ``ms``."""
    mem, ks, gov = ms.memory, ms.knowledge, ms.governance

    async def memory_add(a: Any, t: str) -> Any:
        times = a.pick("timestamp", "valid_from", "valid_until", "ttl")
        options = a.pick("layer", "metadata", "dedup", "infer")
        return jsonable(await mem.add(a.content, tenant_id=t, **options, **times, **a.ids()))

    async def memory_invalidate(a: Any, t: str) -> Any:
        return {"invalidated": jsonable(await mem.invalidate(a.memory_ids, at=a.at, tenant_id=t))}

    async def memory_add_messages(a: Any, t: str) -> Any:
        added = await mem.add_messages(
            [m.model_dump(exclude_none=True) for m in a.messages],
            tenant_id=t,
            **a.pick("layer", "conversation_id", "metadata", "ttl", "infer"),
            **a.ids(),
        )
        return jsonable(added)

    async def memory_search(a: Any, t: str) -> Any:
        hits = await mem.search(
            a.query,
            tenant_id=t,
            **a.pick("layers", "mode", "limit", "threshold", "tags", "filters"),
            **a.window(),
            **a.ids(),
        )
        return {"results": jsonable(hits), "below_threshold": hits.below_threshold}

    async def memory_get(a: Any, t: str) -> Any:
        # As the library: null when no memory of this tenant has the id (not an error).
        return jsonable(await mem.get(a.memory_id, tenant_id=t))

    async def memory_update(a: Any, t: str) -> Any:
        return jsonable(
            await mem.update(a.memory_id, content=a.content, metadata=a.metadata, tenant_id=t)
        )

    async def memory_delete(a: Any, t: str) -> Any:
        return jsonable(await mem.delete(a.memory_id, tenant_id=t))

    async def memory_list(a: Any, t: str) -> Any:
        return jsonable(
            await mem.list(
                tenant_id=t,
                **a.pick("layers", "tags", "filters", "limit", "cursor"),
                **a.window(),
                **a.ids(),
            )
        )

    async def knowledge_query(a: Any, t: str) -> Any:
        filters = a.pick("type", "layer", "layer_id", "status", "tags", "limit")
        hits = await ks.search(a.query, mode=a.mode, tenant_id=t, **filters)
        return {"results": jsonable(hits)}

    async def knowledge_get(a: Any, t: str) -> Any:
        return jsonable(await ks.get(a.id, history=a.history, tenant_id=t))

    def content(a: KnowledgeContent) -> dict[str, Any]:
        return a.pick(*KnowledgeContent.model_fields)

    async def knowledge_create(a: Any, t: str) -> Any:
        return jsonable(
            await ks.create(
                a.type,
                a.title,
                tenant_id=t,
                **a.pick("layer", "layer_id", "id", "status"),
                **{**content(a), "severity": a.severity or "info"},
            )
        )

    async def knowledge_update(a: Any, t: str) -> Any:
        return jsonable(await ks.update(a.id, title=a.title, tenant_id=t, **content(a)))

    async def knowledge_status(a: Any, t: str) -> Any:
        return jsonable(
            await ks.set_status(
                a.id, a.status, tenant_id=t, **a.pick("superseded_by", "author", "message")
            )
        )

    async def knowledge_history(a: Any, t: str) -> Any:
        return {"history": jsonable(await ks.history(a.id, limit=a.limit, tenant_id=t))}

    async def governance_validate(a: Any, t: str) -> Any:
        return jsonable(await gov.validate(a.layer, a.context, a.layer_id, tenant_id=t))

    async def governance_drift(a: Any, t: str) -> Any:
        return jsonable(await gov.drift(a.layer, a.contexts, a.layer_id, tenant_id=t))

    async def governance_policies(a: Any, t: str) -> Any:
        return {"policies": jsonable(await gov.policies(a.layer, a.layer_id, tenant_id=t))}

    spec: list[tuple[str, str, str, type[BaseModel], Handler, bool]] = [
        (
            "memory_add",
            "memory",
            "Store a memory in a scope layer (secrets are refused in shared layers).",
            MemoryAdd,
            memory_add,
            False,
        ),
        (
            "memory_add_messages",
            "memory",
            "Store a conversation: each message one memory, verbatim, with its speaker, time "
            "and position (all or none); infer: consolidate the facts it holds.",
            MemoryAddMessages,
            memory_add_messages,
            False,
        ),
        (
            "memory_search",
            "memory",
            "Search memories across the layers the identifiers reach, most specific first.",
            MemorySearch,
            memory_search,
            True,
        ),
        (
            "memory_get",
            "memory",
            "Read one memory by id (null when there is none).",
            MemoryId,
            memory_get,
            True,
        ),
        (
            "memory_update",
            "memory",
            "Change a memory's content or metadata.",
            MemoryUpdate,
            memory_update,
            False,
        ),
        (
            "memory_delete",
            "memory",
            "Delete a memory (its history keeps who deleted it and when, never its content).",
            MemoryId,
            memory_delete,
            False,
        ),
        (
            "memory_invalidate",
            "memory",
            "Mark facts as no longer holding (kept; search them with include_invalid).",
            MemoryInvalidate,
            memory_invalidate,
            False,
        ),
        (
            "memory_list",
            "memory",
            "List memories, newest first, with filters and pages.",
            MemoryList,
            memory_list,
            True,
        ),
        (
            "knowledge_query",
            "knowledge",
            "Search ADRs, policies, patterns and specs (accepted by default).",
            KnowledgeQuery,
            knowledge_query,
            True,
        ),
        (
            "knowledge_get",
            "knowledge",
            "Read a knowledge item, optionally with its history.",
            KnowledgeGet,
            knowledge_get,
            True,
        ),
        (
            "knowledge_create",
            "knowledge",
            "Add a knowledge item (one git commit).",
            KnowledgeCreate,
            knowledge_create,
            False,
        ),
        (
            "knowledge_update",
            "knowledge",
            "Change a knowledge item's content (one commit).",
            KnowledgeUpdate,
            knowledge_update,
            False,
        ),
        (
            "knowledge_status",
            "knowledge",
            "Move a knowledge item along draft → proposed → accepted → deprecated | superseded.",
            KnowledgeStatusArgs,
            knowledge_status,
            False,
        ),
        (
            "knowledge_history",
            "knowledge",
            "The commits that changed a knowledge item.",
            KnowledgeHistory,
            knowledge_history,
            True,
        ),
        (
            "governance_validate",
            "governance",
            "Check a file, dependencies, imports or config "
            "against the policies in force at a layer.",
            GovernanceValidate,
            governance_validate,
            True,
        ),
        (
            "governance_drift",
            "governance",
            "Score how far contexts drift from a layer's policies (0 clean … 1).",
            GovernanceDrift,
            governance_drift,
            True,
        ),
        (
            "governance_policies",
            "governance",
            "The policies in force at a layer, merged from the company down.",
            GovernancePolicies,
            governance_policies,
            True,
        ),
    ]
    # The memory skill's tools for a memory's life and the hierarchy follow its others.
    after = next(i for i, entry in enumerate(spec) if entry[1] != "memory")
    spec[after:after] = lifecycle_tools(ms)
    return [ServerTool(n, s, d, m, h, r) for n, s, d, m, h, r in spec]
