"""Knowledge files: where an item lives in the repository, and its Markdown with YAML front
matter. Every id and path is checked here so that none can leave the repository."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache
from typing import Any

from pydantic import ValidationError

from lamina.checks import first_error
from lamina.errors import ErrorCode, LaminaError
from lamina.knowledge.models import KnowledgeItem, KnowledgeLayer, KnowledgeType


class _BadYAML(Exception):
    """PyYAML's error, with its message, raised by ``_load``."""


@cache
def _yaml() -> tuple[Any, Any, Any]:
    """PyYAML and its (C when built) safe loader and dumper, imported on first use."""
    import yaml

    return (
        yaml,
        getattr(yaml, "CSafeLoader", yaml.SafeLoader),
        getattr(yaml, "CSafeDumper", yaml.SafeDumper),
    )


def _dump(value: Any) -> str:
    yaml, _, dumper = _yaml()
    text: str = yaml.dump(value, Dumper=dumper, sort_keys=False, allow_unicode=True)
    return text


def _load(text: str) -> Any:
    """The YAML ``text`` as data; _BadYAML when it is not valid YAML."""
    yaml, loader, _ = _yaml()
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise _BadYAML(str(exc)) from None


#: Ids of items and layers: a letter or digit, then letters, digits, '.', '_' or '-'.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

LAYER_DIRS = {
    KnowledgeLayer.COMPANY: "company",
    KnowledgeLayer.ORG: "orgs",
    KnowledgeLayer.TEAM: "teams",
    KnowledgeLayer.PROJECT: "projects",
}
TYPE_DIRS = {
    KnowledgeType.ADR: "adrs",
    KnowledgeType.POLICY: "policies",
    KnowledgeType.PATTERN: "patterns",
    KnowledgeType.SPEC: "specs",
}
MANIFEST = "manifest.yaml"
PROMOTIONS_DIR = "promotions"

#: Front matter fields in the order they are written.
FIELDS = (
    "id",
    "type",
    "layer",
    "layer_id",
    "title",
    "summary",
    "status",
    "severity",
    "tags",
    "constraints",
    "authors",
    "related",
    "supersedes",
    "superseded_by",
    "created",
    "updated",
    "policy_id",
    "mode",
    "merge_strategy",
    "rules",
)


def check_id(name: str, value: object) -> str:
    """An item, layer or promotion id; anything that could name another path is refused."""
    if not isinstance(value, str) or not _ID.match(value) or ".." in value:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name} {value!r} is not valid: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without '..'",
            details={"field": name},
        )
    return value


def check_layer(layer: object, layer_id: object) -> tuple[KnowledgeLayer, str | None]:
    try:
        parsed = KnowledgeLayer(str(layer))
    except ValueError:
        raise LaminaError(
            ErrorCode.INVALID_LAYER,
            f"knowledge layer {layer!r} is not one of company, org, team, project",
            details={"valid_layers": [v.value for v in KnowledgeLayer]},
        ) from None
    if parsed is KnowledgeLayer.COMPANY:
        if layer_id not in (None, ""):
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                "the company layer takes no layer_id (the tenant is the company)",
                details={"field": "layer_id"},
            )
        return parsed, None
    if layer_id in (None, ""):
        raise LaminaError(
            ErrorCode.MISSING_IDENTIFIER,
            f"the {parsed.value} layer needs a layer_id (the {parsed.value}'s id)",
            details={"identifier": "layer_id"},
        )
    return parsed, check_id("layer_id", layer_id)


def layer_dir(layer: KnowledgeLayer, layer_id: str | None) -> str:
    if layer is KnowledgeLayer.COMPANY:
        return "company"
    return f"{LAYER_DIRS[layer]}/{check_id('layer_id', layer_id)}"


def item_path(kind: KnowledgeType, layer: KnowledgeLayer, layer_id: str | None, id_: str) -> str:
    return f"{layer_dir(layer, layer_id)}/{TYPE_DIRS[kind]}/{check_id('id', id_)}.md"


def is_item_path(path: str) -> bool:
    """Whether ``path`` is where an item file may live (layer dir, type dir, ``.md``)."""
    parts = path.split("/")
    if not path.endswith(".md"):
        return False
    if len(parts) == 3 and parts[0] == "company":
        return parts[1] in TYPE_DIRS.values()
    return len(parts) == 4 and parts[0] in LAYER_DIRS.values() and parts[2] in TYPE_DIRS.values()


def promotion_path(promotion_id: str) -> str:
    return f"{PROMOTIONS_DIR}/{check_id('promotion id', promotion_id)}.yaml"


class FrontMatterError(LaminaError):
    def __init__(self, path: str, field: str | None, problem: str) -> None:
        where = f"{path}: field {field!r}" if field else path
        super().__init__(
            ErrorCode.INVALID_FRONT_MATTER,
            f"{where}: {problem}",
            details={"path": path, "field": field},
        )


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def render(item: KnowledgeItem) -> bytes:
    """The item as a Markdown file with YAML front matter."""
    raw = item.model_dump(mode="json", exclude={"body", "path", "commit"})
    raw["created"] = _iso(item.created)
    raw["updated"] = _iso(item.updated)
    if item.type.value != "policy":
        for name in ("policy_id", "mode", "merge_strategy", "rules"):
            raw.pop(name, None)
    front = {name: raw[name] for name in FIELDS if name in raw}
    for name in ("layer_id", "policy_id", "superseded_by"):
        if front.get(name) is None:
            front.pop(name, None)
    head = _dump(front)
    body = item.body if item.body.endswith("\n") or not item.body else item.body + "\n"
    return f"---\n{head}---\n{body}".encode()


def split(path: str, data: bytes) -> tuple[dict[str, Any], str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise FrontMatterError(path, None, "the file is not UTF-8") from None
    if not text.startswith("---\n"):
        raise FrontMatterError(path, None, "the file does not start with a '---' front matter")
    end = text.find("\n---\n", 3)
    if end < 0:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            raise FrontMatterError(path, None, "the front matter has no closing '---'")
    try:
        front = _load(text[4 : end + 1])
    except _BadYAML as exc:
        raise FrontMatterError(path, None, f"the front matter is not valid YAML: {exc}") from None
    if not isinstance(front, dict):
        raise FrontMatterError(path, None, "the front matter is not a YAML mapping")
    return front, text[end + 5 :]


def parse(path: str, data: bytes, commit: str | None = None) -> KnowledgeItem:
    """A file read back as an item; FrontMatterError names the file and the field."""
    front, body = split(path, data)
    unknown = sorted(str(k) for k in front if k not in FIELDS)
    if unknown:
        raise FrontMatterError(path, unknown[0], "unknown front matter field")
    for name in ("id", "type", "layer", "title", "created", "updated"):
        if front.get(name) in (None, ""):
            raise FrontMatterError(path, name, "required field is missing")
    try:
        item = KnowledgeItem.model_validate({**front, "body": body, "path": path, "commit": commit})
    except ValidationError as exc:
        where, message = first_error(exc)
        raise FrontMatterError(path, where or None, message) from None
    for name, value in (
        ("id", item.id),
        ("layer_id", item.layer_id),
        ("policy_id", item.policy_id),
    ):
        if value is not None and (not _ID.match(value) or ".." in value):
            raise FrontMatterError(path, name, "not a valid id")
    if (item.layer is KnowledgeLayer.COMPANY) != (item.layer_id is None):
        raise FrontMatterError(path, "layer_id", "company takes none; other layers need one")
    expected = item_path(item.type, item.layer, item.layer_id, item.id)
    if expected != path:
        raise FrontMatterError(
            path, "id", f"the file of this id, type and layer must be at {expected}"
        )
    return item


def dump_yaml(value: Any) -> bytes:
    return _dump(value).encode()


def load_yaml(path: str, data: bytes) -> Any:
    try:
        return _load(data.decode("utf-8"))
    except (_BadYAML, UnicodeDecodeError) as exc:
        raise FrontMatterError(path, None, f"not valid YAML: {exc}") from None
