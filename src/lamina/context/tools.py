"""Agent-facing tools over the context layers: name, description, JSON schema, handler.

Adapters (A2A skills, MCP tools, function calling) expose these as they are. A handler takes
the arguments an agent sent (a JSON object) and returns a JSON object; bad arguments raise
LaminaError with INVALID_ARGUMENT (unknown or missing fields) or the store's code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lamina.context.models import KnowledgeCategory, LearningCategory, SkillType
from lamina.context.searchable_layers import CategorisedStore
from lamina.context.service import ContextService
from lamina.errors import ErrorCode, LaminaError

Handler = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class AgentTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler

    async def __call__(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return await self.handler(arguments)


def object_schema(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments: an object of ``properties``, ``required``
    given, no others."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _args(schema: dict[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(arguments, Mapping):
        raise LaminaError(ErrorCode.INVALID_ARGUMENT, "tool arguments must be a JSON object")
    unknown = sorted(set(arguments) - set(schema["properties"]))
    if unknown:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            f"unknown argument(s): {', '.join(unknown)}",
            details={"unknown": unknown},
        )
    missing = [k for k in schema["required"] if arguments.get(k) is None]
    if missing:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            f"missing argument(s): {', '.join(missing)}",
            details={"missing": missing},
        )
    return {k: v for k, v in arguments.items() if v is not None}


_TEXT = {"type": "string"}
_TAGS = {"type": "array", "items": {"type": "string"}}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 100}


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json")


def _search_tool(
    store: CategorisedStore[Any, Any], categories: type[StrEnum]
) -> tuple[dict[str, Any], Handler]:
    """The schema and handler of a tool searching ``store`` (optionally by category)."""
    schema = object_schema(
        ["query"],
        query=_TEXT,
        limit=_LIMIT,
        category={"type": "string", "enum": [c.value for c in categories]},
    )

    async def search(arguments: Mapping[str, Any]) -> dict[str, Any]:
        a = _args(schema, arguments)
        hits = await store.search(a["query"], limit=a.get("limit", 5), category=a.get("category"))
        return {"results": [_dump(h) for h in hits]}

    return schema, search


def _save_tool(
    save: Callable[..., Awaitable[Any]],
    schema: dict[str, Any],
    positional: Sequence[str],
    **defaults: Any,
) -> Handler:
    """The handler of a tool saving an item through ``save``: the arguments given (and
    ``defaults`` for those not given), ``positional`` ones first, in order."""

    async def handler(arguments: Mapping[str, Any]) -> dict[str, Any]:
        a = {**defaults, **_args(schema, arguments)}
        first = [a.pop(name) for name in positional]
        item = await save(*first, **a)
        return {"saved": _dump(item)}

    return handler


def _save_knowledge(context: ContextService) -> AgentTool:
    schema = object_schema(
        ["key", "content"],
        key={**_TEXT, "description": "A stable name for this piece of knowledge."},
        content={**_TEXT, "description": "What to remember."},
        category={"type": "string", "enum": [c.value for c in KnowledgeCategory]},
        tags=_TAGS,
        source={**_TEXT, "description": "Where it came from (a user, a document)."},
    )
    return AgentTool(
        "save_knowledge",
        "Remember a rule, definition, preference, fact, pattern or correction from the "
        "user. Saving an existing key adds a new version.",
        schema,
        _save_tool(context.knowledge.save, schema, ("key", "content"), category="fact"),
    )


def _search_knowledge(context: ContextService) -> AgentTool:
    schema, search = _search_tool(context.knowledge, KnowledgeCategory)
    return AgentTool("search_knowledge", "Search what the user has taught you.", schema, search)


def _save_learning(context: ContextService) -> AgentTool:
    schema = object_schema(
        ["trigger"],
        trigger={**_TEXT, "description": "The situation or error message that occurred."},
        fix={**_TEXT, "description": "What resolved it."},
        error_pattern=_TEXT,
        diagnosis=_TEXT,
        category={"type": "string", "enum": [c.value for c in LearningCategory]},
        tags=_TAGS,
    )
    return AgentTool(
        "save_learning",
        "Record a lesson from an error: the trigger, what caused it, and the fix.",
        schema,
        _save_tool(context.learnings.save, schema, ("trigger", "fix"), fix="", category="general"),
    )


def _search_learnings(context: ContextService) -> AgentTool:
    schema, search = _search_tool(context.learnings, LearningCategory)
    return AgentTool(
        "search_learnings", "Find known fixes for an error or situation.", schema, search
    )


def _create_skill(context: ContextService) -> AgentTool:
    schema = object_schema(
        ["name", "description"],
        name=_TEXT,
        description=_TEXT,
        type={"type": "string", "enum": [t.value for t in SkillType]},
        definition={**_TEXT, "description": "Steps, a script, or a template."},
        parameters={"type": "object"},
        tags=_TAGS,
    )
    return AgentTool(
        "create_skill",
        "Save a reusable procedure (composite steps, a script or a template) by name.",
        schema,
        _save_tool(context.skills.save, schema, ("name", "description"), type="composite"),
    )


def _list_skills(context: ContextService) -> AgentTool:
    schema = object_schema(
        [],
        type={"type": "string", "enum": [t.value for t in SkillType]},
        limit=_LIMIT,
        cursor=_TEXT,
    )

    async def list_skills(arguments: Mapping[str, Any]) -> dict[str, Any]:
        a = _args(schema, arguments)
        page = await context.skills.list(
            type=a.get("type"), limit=a.get("limit", 50), cursor=a.get("cursor")
        )
        return _dump(page)  # type: ignore[no-any-return]

    return AgentTool("list_skills", "List saved skills.", schema, list_skills)


def agent_tools(context: ContextService) -> list[AgentTool]:
    """save_knowledge, search_knowledge, save_learning, search_learnings, create_skill,
    list_skills, bound to ``context``."""
    tools = (
        _save_knowledge,
        _search_knowledge,
        _save_learning,
        _search_learnings,
        _create_skill,
        _list_skills,
    )
    return [tool(context) for tool in tools]
