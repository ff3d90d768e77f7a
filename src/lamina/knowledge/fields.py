"""Checks of the arguments knowledge calls take: item content, policy fields, list filters,
authors, commit ids (on top of the shared checks in ``lamina.checks``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from pydantic import ValidationError

from lamina.checks import check_choice, check_strings, check_text, first_error, invalid
from lamina.knowledge.document import check_id
from lamina.knowledge.index import filter_tag
from lamina.knowledge.models import KnowledgeLayer, KnowledgeStatus, KnowledgeType
from lamina.knowledge.policy import MergeStrategy, PolicyMode, Rule, Severity

MAX_TITLE = 300
MAX_SUMMARY = 2_000
MAX_MESSAGE = 2_000
MAX_LIST = 100
MAX_LIST_ITEM = 1_000
MAX_AUTHOR = 200
ANY_STATUS = "any"


class ItemFields(TypedDict, total=False):
    """The content keyword arguments of knowledge ``create`` and ``update`` (None: not
    given); the last four are policies' only."""

    summary: str | None
    body: str | None
    severity: str | Severity | None
    tags: Sequence[str] | None
    constraints: Sequence[str] | None
    authors: Sequence[str] | None
    related: Sequence[str] | None
    policy_id: str | None
    mode: str | PolicyMode | None
    merge_strategy: str | MergeStrategy | None
    rules: Sequence[Any] | None


#: The fields only policies have, in check_policy_fields' order.
POLICY_FIELDS = ("policy_id", "mode", "merge_strategy", "rules")


def item_fields(call: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every content field of a call (None: not given); an unknown name is the TypeError
    any unexpected keyword argument is."""
    for name in given:
        if name not in ItemFields.__annotations__:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")
    return {name: given.get(name) for name in ItemFields.__annotations__}


def check_list(name: str, value: object) -> list[str]:
    return check_strings(name, value, max_items=MAX_LIST, max_length=MAX_LIST_ITEM)


def check_author(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_AUTHOR:
        raise invalid(
            f"author must be a non-empty string of at most {MAX_AUTHOR} characters", "author"
        )
    if any(c in value for c in "\n\r\x00"):
        raise invalid("author must be one line", "author")
    return value.strip()


def check_message(message: object) -> str | None:
    """A commit message given by the caller (None: the default message)."""
    return None if message is None else check_text("message", message, MAX_MESSAGE)


def check_commit(name: str, value: object) -> str:
    if (
        not isinstance(value, str)
        or len(value) != 40
        or any(c not in "0123456789abcdef" for c in value)
    ):
        raise invalid(f"{name} must be a full 40-character commit id", name)
    return value


def check_rules(value: object) -> list[Rule]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("rules must be a list of rule objects", "rules")
    out = []
    for i, raw in enumerate(value):
        if isinstance(raw, Rule):
            out.append(raw)
            continue
        try:
            out.append(Rule.model_validate(raw))
        except ValidationError as exc:
            where, message = first_error(exc)
            raise invalid(f"rules[{i}]{'.' + where if where else ''}: {message}", "rules") from None
    ids = [r.id for r in out]
    if len(set(ids)) != len(ids):
        raise invalid("rule ids must be unique within a policy", "rules")
    return out


def check_item_fields(max_body: int, **given: Any) -> dict[str, Any]:
    """The content fields given (None: not given), each checked."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name == "title":
            out[name] = check_text(name, value, MAX_TITLE, required=True).strip()
        elif name == "summary":
            out[name] = check_text(name, value, MAX_SUMMARY).strip()
        elif name == "body":
            out[name] = check_text(name, value, max_body)
        elif name == "severity":
            out[name] = check_choice(name, value, Severity)
        elif name in ("related", "supersedes"):
            out[name] = [check_id(name, r) for r in check_list(name, value)]
        else:  # tags, constraints, authors
            out[name] = check_list(name, value)
    return out


def check_policy_fields(
    kind: KnowledgeType, policy_id: object, mode: object, merge_strategy: object, rules: object
) -> dict[str, Any]:
    """The fields only policies have, checked (with their defaults); none for other types."""
    if kind is not KnowledgeType.POLICY:
        if policy_id is not None or mode is not None or merge_strategy is not None or rules:
            raise invalid(
                "policy_id, mode, merge_strategy and rules belong to policies only", "type"
            )
        return {}
    return {
        "policy_id": None if policy_id is None else check_id("policy_id", policy_id),
        "mode": check_choice("mode", mode or PolicyMode.OPTIONAL, PolicyMode),
        "merge_strategy": check_choice(
            "merge_strategy", merge_strategy or MergeStrategy.MERGE, MergeStrategy
        ),
        "rules": check_rules(rules),
    }


class ItemFilters(TypedDict, total=False):
    """The filters of knowledge ``list`` and ``search``: type, layer (and layer_id), status
    (accepted when not given; ``"any"`` or None for all) and tags (any of them)."""

    type: str | KnowledgeType | None
    layer: str | KnowledgeLayer | None
    layer_id: str | None
    status: str | KnowledgeStatus | None
    tags: Sequence[str] | None


def item_filters(call: str, given: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """The index tag and the tags wanted of a call's filters (ItemFilters); an unknown name
    is the TypeError any unexpected keyword argument is."""
    for name in given:
        if name not in ItemFilters.__annotations__:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")
    return check_filters(
        given.get("type"),
        given.get("layer"),
        given.get("layer_id"),
        given.get("status", KnowledgeStatus.ACCEPTED),
        given.get("tags"),
    )


def check_filters(
    type: object, layer: object, layer_id: object, status: object, tags: object
) -> tuple[str | None, list[str]]:
    """The index tag of the type, layer and status filters, and the tags wanted."""
    kind = None if type is None else check_choice("type", type, KnowledgeType).value
    where = scope = None
    if layer is not None:
        parsed = check_choice("layer", layer, KnowledgeLayer)
        if layer_id is not None and parsed is not KnowledgeLayer.COMPANY:
            scope = f"{parsed.value}/{check_id('layer_id', layer_id)}"
        else:
            where = parsed.value
            if parsed is KnowledgeLayer.COMPANY:
                scope, where = "company", None
    elif layer_id is not None:
        raise invalid("layer_id needs layer", "layer_id")
    state = (
        None
        if status is None or status == ANY_STATUS
        else check_choice("status", status, KnowledgeStatus).value
    )
    return filter_tag(kind, state, where, scope), check_list("tags", tags)
