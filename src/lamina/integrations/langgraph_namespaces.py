"""LangGraph namespaces as lamina scopes: where a namespace's items are stored, and where the
items under a namespace prefix can be.

A namespace that starts with a layer name and its identifier(s) is stored in that layer, for
those identifiers (``("user", "alice", ...)``, ``("agent", "bot", "alice", ...)``); any other
in the store's default scope. A prefix that stops before the identifiers (``("user",)``,
``()``) reaches every scope of the layer (of every layer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lamina.checks import storable
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.layers import MemoryLayer, parse_layer

__all__ = ["Reach", "Scope", "check_namespace", "default_scope", "fixed_prefix", "matches", "under"]

#: A layer and its identifiers.
Scope = tuple[str, dict[str, str]]
_LAYERS = frozenset(layer.value for layer in MemoryLayer)


def _bad(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def default_scope(scope: Mapping[str, str] | None) -> Scope | None:
    """The store's ``scope`` argument (``{"layer": "project", "project_id": "p1"}``)."""
    if scope is None:
        return None
    rest = dict(scope)
    layer = parse_layer(rest.pop("layer", "project")).value
    return layer, rest


@dataclass(frozen=True)
class Reach:
    """Where the items under a namespace prefix are: one scope (``scope``), or the memories
    of ``layers`` (all: empty) whose identifiers include ``ids``; ``nowhere``: none can be."""

    scope: Scope | None = None
    layers: tuple[str, ...] = ()
    ids: dict[str, str] = field(default_factory=dict)
    nowhere: bool = False

    @classmethod
    def of(cls, prefix: tuple[str, ...], default: Scope | None) -> Reach:
        if not prefix:
            return cls()
        if prefix[0] in _LAYERS:
            layer = MemoryLayer(prefix[0])
            names = layer.required_identifiers
            ids = dict(zip(names, prefix[1 : 1 + len(names)], strict=False))
            if len(ids) == len(names):
                return cls(scope=(layer.value, ids))
            return cls(layers=(layer.value,), ids=ids)
        if default is None:
            return cls(nowhere=True)
        return cls(scope=default)

    def writable(self, namespace: tuple[str, ...]) -> Scope:
        """The scope a put to ``namespace`` (this its reach) writes in, or INVALID_ARGUMENT."""
        if self.scope is not None:
            return self.scope
        if namespace and namespace[0] in _LAYERS:
            layer = MemoryLayer(namespace[0])
            raise _bad(
                f"namespace {namespace!r}: the {layer.value} layer needs "
                f"{', '.join(layer.required_identifiers)} after it",
                namespace=list(namespace),
            )
        raise _bad(
            f"namespace {namespace!r} names no memory layer (start it with user, agent, "
            "session, project, team, org or company and the identifier) and the store "
            "has no default scope",
            namespace=list(namespace),
        )


def check_namespace(namespace: Any) -> tuple[str, ...]:
    """The namespace, or INVALID_ARGUMENT for labels LangGraph refuses (empty, not text,
    holding a period) or no store can hold (a NUL, a lone surrogate)."""
    if not isinstance(namespace, tuple) or not all(
        isinstance(label, str) and label and "." not in label and storable(label)
        for label in namespace
    ):
        raise _bad(
            f"namespace {namespace!r}: a tuple of non-empty strings without periods (valid "
            "Unicode without NUL characters)",
            namespace=repr(namespace),
        )
    return namespace


def under(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return namespace[: len(prefix)] == prefix


def matches(namespace: tuple[str, ...], match_type: str, path: Sequence[str]) -> bool:
    """LangGraph's match condition: ``namespace`` starts (``prefix``) or ends (``suffix``)
    with ``path``, ``*`` matching any label."""
    if not path:
        return True
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def fixed_prefix(conditions: Sequence[tuple[str, Sequence[str]]]) -> tuple[str, ...]:
    """The longest namespace prefix (up to a ``*``) the (match_type, path) conditions fix:
    every namespace they match lies under it."""
    prefix: tuple[str, ...] = ()
    for match_type, path in conditions:
        if match_type != "prefix":
            continue
        check_namespace(tuple(label for label in path if label != "*"))
        fixed: list[str] = []
        for label in path:
            if label == "*":
                break
            fixed.append(label)
        prefix = max(prefix, tuple(fixed), key=len)
    return prefix
