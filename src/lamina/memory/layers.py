"""Memory scope layers: who a memory belongs to, and which identifiers reach it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, TypedDict

from pydantic import ConfigDict, model_validator

from lamina.checks import check_identifier
from lamina.config import IdentifierFields
from lamina.errors import ErrorCode, LaminaError


class MemoryLayer(StrEnum):
    """The seven scope layers, declared most specific first."""

    AGENT = "agent"
    USER = "user"
    SESSION = "session"
    PROJECT = "project"
    TEAM = "team"
    ORG = "org"
    COMPANY = "company"

    @property
    def precedence(self) -> int:
        """1 (agent, most specific) … 7 (company, most general)."""
        return _PRECEDENCE[self]

    @property
    def required_identifiers(self) -> tuple[str, ...]:
        """The identifiers a memory of this layer is scoped by."""
        return _REQUIRED[self]


_PRECEDENCE = {layer: i for i, layer in enumerate(MemoryLayer, start=1)}
_REQUIRED: dict[MemoryLayer, tuple[str, ...]] = {
    MemoryLayer.AGENT: ("agent_id", "user_id"),
    MemoryLayer.USER: ("user_id",),
    MemoryLayer.SESSION: ("session_id", "user_id"),
    MemoryLayer.PROJECT: ("project_id",),
    MemoryLayer.TEAM: ("team_id",),
    MemoryLayer.ORG: ("org_id",),
    MemoryLayer.COMPANY: ("company_id",),
}

#: The seven identifiers, in layer order (declared once, in ``config.IdentifierFields``).
IDENTIFIER_NAMES: tuple[str, ...] = tuple(IdentifierFields.model_fields)


def parse_layer(value: str | MemoryLayer) -> MemoryLayer:
    """The layer named by ``value``, or INVALID_LAYER listing the valid names."""
    if isinstance(value, MemoryLayer):
        return value
    try:
        return MemoryLayer(str(value).strip().lower())
    except ValueError:
        valid = [layer.value for layer in MemoryLayer]
        raise LaminaError(
            ErrorCode.INVALID_LAYER,
            f"invalid memory layer {value!r}; valid layers: {', '.join(valid)}",
            details={"layer": str(value), "valid_layers": valid},
        ) from None


def parse_layers(values: Iterable[str | MemoryLayer] | None) -> list[MemoryLayer] | None:
    if values is None:
        return None
    if isinstance(values, str | MemoryLayer):
        values = [values]
    out = sorted({parse_layer(v) for v in values}, key=lambda layer: layer.precedence)
    if not out:
        raise LaminaError(ErrorCode.INVALID_LAYER, "layers must name at least one layer")
    return out


class IdentifierArgs(TypedDict, total=False):
    """The identifier keyword arguments of the memory calls (``**scope_ids:
    Unpack[IdentifierArgs]``): each a string, or None for not given."""

    agent_id: str | None
    user_id: str | None
    session_id: str | None
    project_id: str | None
    team_id: str | None
    org_id: str | None
    company_id: str | None


def check_identifier_names(call: str, names: Iterable[str]) -> None:
    """An identifier keyword argument of ``call`` that is not one of lamina's identifiers
    is the TypeError any unexpected keyword argument is."""
    for name in names:
        if name not in IDENTIFIER_NAMES:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")


def identifier_args(given: Mapping[str, Any]) -> dict[str, str | None]:
    """Identifier name → value (None: not given) of a call's identifier keyword arguments
    (their names checked as the call starts: ``check_identifier_names``)."""
    return {name: given.get(name) for name in IDENTIFIER_NAMES}


def identifier_map(*values: str | None) -> dict[str, str | None]:
    """Identifier name → value, the values given in ``IDENTIFIER_NAMES`` order."""
    return dict(zip(IDENTIFIER_NAMES, values, strict=True))


class Identifiers(IdentifierFields):
    """The identifiers a call carries; ``None`` means not given."""

    model_config = ConfigDict(frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _check(cls, values: Any) -> Any:
        """Each identifier given is a clean string (MISSING_IDENTIFIER / INVALID_ARGUMENT)."""
        if isinstance(values, Mapping):
            for name in IDENTIFIER_NAMES:
                if values.get(name) is not None:
                    check_identifier(name, values[name])
        return values

    @classmethod
    def of(cls, *values: str | None) -> Identifiers:
        """The identifiers given in ``IDENTIFIER_NAMES`` order (agent_id … company_id)."""
        return cls(**identifier_map(*values))

    def get(self, name: str) -> str | None:
        value: str | None = getattr(self, name)
        return value

    def with_parents(
        self, team_id: str | None, org_id: str | None, company_id: str | None
    ) -> Identifiers:
        parents = {"team_id": team_id, "org_id": org_id, "company_id": company_id}
        return Identifiers.model_validate({**self.model_dump(), **parents})

    def given(self) -> dict[str, str]:
        return {n: v for n in IDENTIFIER_NAMES if (v := getattr(self, n)) is not None}


def scope_for(layer: MemoryLayer, ids: Identifiers) -> dict[str, str]:
    """The identifiers scoping ``layer``, or MISSING_IDENTIFIER naming the first absent one."""
    scope: dict[str, str] = {}
    for name in layer.required_identifiers:
        value = ids.get(name)
        if value is None:
            raise LaminaError(
                ErrorCode.MISSING_IDENTIFIER,
                f"layer '{layer.value}' requires {name}",
                details={"identifier": name, "layer": layer.value},
            )
        scope[name] = value
    return scope


def scope_key(layer: MemoryLayer, scope: dict[str, str]) -> str:
    """A canonical string for one layer's scope (identifiers never hold control characters)."""
    return "\x1f".join(scope[name] for name in layer.required_identifiers)


def accessible_layers(ids: Identifiers) -> list[MemoryLayer]:
    """The layers whose required identifiers are all present, most specific first."""
    return [
        layer
        for layer in MemoryLayer
        if all(ids.get(name) is not None for name in layer.required_identifiers)
    ]


#: The order ``layer_for`` tries the layers in: a session belongs to a user, so it is the more
#: specific place to write even though user memories rank before session memories in search.
_WRITE_ORDER = (
    MemoryLayer.AGENT,
    MemoryLayer.SESSION,
    MemoryLayer.USER,
    MemoryLayer.PROJECT,
    MemoryLayer.TEAM,
    MemoryLayer.ORG,
    MemoryLayer.COMPANY,
)


def layer_for(ids: Identifiers) -> MemoryLayer:
    """The most specific layer the identifiers given reach, for a write that names no layer:
    agent (agent_id + user_id), session (session_id + user_id), user, project, team, org,
    company. MISSING_IDENTIFIER when they reach none."""
    for layer in _WRITE_ORDER:
        if all(ids.get(name) is not None for name in layer.required_identifiers):
            return layer
    raise LaminaError(
        ErrorCode.MISSING_IDENTIFIER,
        "no memory layer is reachable: give user_id, project_id, team_id, org_id, "
        "company_id, or agent_id/session_id with user_id (or name the layer)",
        details={"identifier": "user_id"},
    )
