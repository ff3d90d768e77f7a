"""A LangGraph ``BaseStore`` backed by lamina memory (``pip install 'lamina[langgraph]'``).

Each item is one memory. Namespaces map to scope layers: a namespace that starts with a layer
name and its identifier(s) is stored in that layer, for those identifiers::

    ("user", "alice", ...)                 user layer, user_id=alice
    ("agent", "bot", "alice", ...)         agent layer, agent_id=bot, user_id=alice
    ("session", "s1", "alice", ...)        session layer, session_id=s1, user_id=alice
    ("project" | "team" | "org" | "company", "<id>", ...)

Any other namespace goes to the store's ``scope`` (for example
``{"layer": "project", "project_id": "my-graph"}``); without one it is INVALID_ARGUMENT.
The memory's content is the value's ``content`` (or ``text``) when it is a string, else the
value as JSON; the value itself, the namespace and the key are kept in the memory's metadata
(``langgraph``), so filters apply to the value's fields and semantic search to its text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from lamina.extras import require

require("langgraph", "The LangGraph store")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from lamina.errors import ErrorCode, LaminaError  # noqa: E402
from lamina.facade import Lamina  # noqa: E402
from lamina.integrations.bridge import Bridge  # noqa: E402
from lamina.memory.layers import MemoryLayer, parse_layer  # noqa: E402
from lamina.memory.models import MemoryEntry  # noqa: E402
from lamina.runtime import AsyncLamina  # noqa: E402

__all__ = ["LaminaStore"]

META = "langgraph"
_OPERATORS = {"$eq": "eq", "$ne": "ne", "$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
_LAYERS = frozenset(layer.value for layer in MemoryLayer)
#: Most memories one list_namespaces call looks through.
NAMESPACE_SCAN = 10_000


def _bad(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


class LaminaStore(BaseStore):
    """LangGraph's long-term memory store over lamina memory (sync and async)."""

    def __init__(
        self,
        lamina: Lamina | AsyncLamina,
        *,
        scope: Mapping[str, str] | None = None,
        tenant_id: str | None = None,
    ) -> None:
        """``scope``: the layer and identifiers of namespaces that do not name one
        (``{"layer": "project", "project_id": "p1"}``)."""
        self._bridge = Bridge(lamina, tenant_id=tenant_id)
        self._default: tuple[str, dict[str, Any]] | None = None
        if scope is not None:
            rest = dict(scope)
            layer = parse_layer(rest.pop("layer", "project")).value
            self._default = (layer, rest)

    # -- namespaces ↔ scopes ----------------------------------------------------------------

    def _scope(self, namespace: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
        if namespace and namespace[0] in _LAYERS:
            layer = MemoryLayer(namespace[0])
            names = layer.required_identifiers
            values = namespace[1 : 1 + len(names)]
            if len(values) < len(names):
                raise _bad(
                    f"namespace {namespace!r}: the {layer.value} layer needs "
                    f"{', '.join(names)} after it",
                    namespace=list(namespace),
                )
            return layer.value, dict(zip(names, values, strict=True))
        if self._default is None:
            raise _bad(
                f"namespace {namespace!r} names no memory layer (start it with user, agent, "
                "session, project, team, org or company and the identifier) and the store "
                "has no default scope",
                namespace=list(namespace),
            )
        return self._default

    # -- the operations ---------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._bridge.run(self.abatch(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._bridge.call(self._get(op.namespace, op.key)))
            elif isinstance(op, PutOp):
                await self._bridge.call(self._put(op))
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._bridge.call(self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._bridge.call(self._namespaces(op)))
            else:
                raise _bad(f"unknown store operation {type(op).__name__}")
        return results

    async def _find(self, namespace: tuple[str, ...], key: str) -> MemoryEntry | None:
        layer, ids = self._scope(namespace)
        page = await self._bridge.ms.memory.list(
            layers=[layer],
            filters={f"{META}.path": ".".join(namespace), f"{META}.key": key},
            limit=1,
            tenant_id=self._bridge.tenant_id,
            **ids,
        )
        return page.items[0] if page.items else None

    async def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = await self._find(namespace, key)
        return None if found is None else _item(found)

    async def _put(self, op: PutOp) -> None:
        memory = self._bridge.ms.memory
        tenant = self._bridge.tenant_id
        found = await self._find(op.namespace, op.key)
        if op.value is None:
            if found is not None:
                await memory.delete(found.id, tenant_id=tenant)
            return
        if not isinstance(op.value, dict):
            raise _bad("a LangGraph store value must be a dict", key=op.key)
        metadata = {META: _meta(op.namespace, op.key, op.value)}
        content = _content(op.value)
        if found is not None:
            await memory.update(found.id, content=content, metadata=metadata, tenant_id=tenant)
            return
        layer, ids = self._scope(op.namespace)
        await memory.add(
            content,
            layer=layer,
            metadata=metadata,
            tenant_id=tenant,
            **ids,
        )

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        layer, ids = self._scope(op.namespace_prefix)
        filters = _filters(op.namespace_prefix, op.filter)
        memory = self._bridge.ms.memory
        wanted = op.offset + op.limit
        if op.query:
            hits = await memory.search(
                op.query,
                layers=[layer],
                filters=filters,
                limit=wanted,
                threshold=0.0,
                tenant_id=self._bridge.tenant_id,
                **ids,
            )
            found: list[tuple[MemoryEntry, float | None]] = [(h.memory, h.score) for h in hits]
        else:
            found = [(m, None) for m in await self._list(layer, ids, filters, wanted)]
        return [_item(m, score) for m, score in found[op.offset : wanted]]

    async def _list(
        self, layer: str, ids: dict[str, Any], filters: dict[str, Any], wanted: int
    ) -> list[MemoryEntry]:
        out: list[MemoryEntry] = []
        cursor: str | None = None
        while len(out) < wanted:
            page = await self._bridge.ms.memory.list(
                layers=[layer],
                filters=filters,
                limit=min(1000, wanted - len(out)),
                cursor=cursor,
                tenant_id=self._bridge.tenant_id,
                **ids,
            )
            out.extend(page.items)
            cursor = page.next_cursor
            if not cursor or not page.items:
                break
        return out

    async def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        prefix = next(
            (c.path for c in conditions if c.match_type == "prefix" and "*" not in c.path), ()
        )
        layer, ids = self._scope(tuple(prefix))
        entries = await self._list(layer, ids, _filters(tuple(prefix), None), NAMESPACE_SCAN)
        found: set[tuple[str, ...]] = set()
        for entry in entries:
            namespace = tuple(entry.metadata[META]["namespace"])
            if all(_matches(namespace, c) for c in conditions):
                found.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(found)[op.offset : op.offset + op.limit]


def _content(value: dict[str, Any]) -> str:
    for field in ("content", "text"):
        text = value.get(field)
        if isinstance(text, str) and text.strip():
            return text
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _meta(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {
        "store": True,
        "namespace": list(namespace),
        "path": ".".join(namespace),
        "prefixes": [".".join(namespace[:n]) for n in range(1, len(namespace) + 1)],
        "key": key,
        "value": value,
    }


def _filters(prefix: tuple[str, ...], wanted: dict[str, Any] | None) -> dict[str, Any]:
    """The namespace prefix and LangGraph's filter ({field: value | {"$op": value}}) as
    lamina metadata filters over the stored value."""
    out: dict[str, Any] = {f"{META}.store": True}
    if prefix:
        out[f"{META}.prefixes"] = {"contains": ".".join(prefix)}
    for field, condition in (wanted or {}).items():
        if isinstance(condition, dict) and condition and all(k in _OPERATORS for k in condition):
            out[f"{META}.value.{field}"] = {_OPERATORS[k]: v for k, v in condition.items()}
        elif isinstance(condition, dict):
            unknown = sorted(k for k in condition if k not in _OPERATORS)
            raise LaminaError(
                ErrorCode.INVALID_FILTER,
                f"filter {field}: unknown operator(s) {unknown}; valid: {sorted(_OPERATORS)}",
                details={"field": field},
            )
        else:
            out[f"{META}.value.{field}"] = condition
    return out


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _item(entry: MemoryEntry, score: float | None = None) -> SearchItem:
    meta = entry.metadata[META]
    created: datetime = entry.created_at
    return SearchItem(
        tuple(meta["namespace"]), meta["key"], meta["value"], created, entry.updated_at, score
    )
