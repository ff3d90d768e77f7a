"""A LangGraph ``BaseStore`` backed by lamina memory (``pip install 'lamina[langgraph]'``).

Each item is one memory. Namespaces map to scope layers: a namespace that starts with a layer
name and its identifier(s) is stored in that layer, for those identifiers::

    ("user", "alice", ...)                 user layer, user_id=alice
    ("agent", "bot", "alice", ...)         agent layer, agent_id=bot, user_id=alice
    ("session", "s1", "alice", ...)        session layer, session_id=s1, user_id=alice
    ("project" | "team" | "org" | "company", "<id>", ...)

Any other namespace goes to the store's ``scope`` (for example
``{"layer": "project", "project_id": "my-graph"}``); a put there without one is
INVALID_ARGUMENT (reads find nothing there). The memory's content is the value's ``content``
(or ``text``) when it is a string, else the value as JSON; the value itself, the namespace and
the key are kept in the memory's metadata (``langgraph``), so filters apply to the value's
fields and semantic search to its text.

It behaves as LangGraph's own stores: every (namespace, key) holds its own item (never
merged with an equal one elsewhere), the reads of a batch see the store as it was before the
batch's writes, and a namespace prefix reaches every namespace under it, also across users
(``search(("user",))``, ``list_namespaces()``) — that reads the tenant's memories of the
layer(s) concerned, where a prefix naming a whole scope reads only that scope's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from lamina.extras import require

require("langgraph", "The LangGraph store")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from lamina.checks import storable  # noqa: E402
from lamina.errors import ErrorCode, LaminaError  # noqa: E402
from lamina.facade import Lamina  # noqa: E402
from lamina.integrations import langgraph_values as values  # noqa: E402
from lamina.integrations.bridge import Bridge  # noqa: E402
from lamina.integrations.langgraph_items import META, Found  # noqa: E402
from lamina.integrations.langgraph_items import found as _found  # noqa: E402
from lamina.integrations.langgraph_items import valid as _valid  # noqa: E402
from lamina.integrations.langgraph_namespaces import (  # noqa: E402
    Reach,
    Scope,
    check_namespace,
    default_scope,
    fixed_prefix,
    matches,
    under,
)
from lamina.runtime import AsyncLamina  # noqa: E402

__all__ = ["LaminaStore"]

#: Memories read per page, and keys looked up per query.
PAGE = 1000
KEYS = 500


def _bad(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def _item(found: Found, score: float | None = None) -> SearchItem:
    """The LangGraph item a stored one is (its value as ``put`` was given it)."""
    value = values.decode(found.meta["value"], found.meta.get("types"))
    namespace = tuple(found.meta["namespace"])
    return SearchItem(
        namespace, found.meta["key"], value, found.created_at, found.updated_at, score
    )


class LaminaStore(BaseStore):
    """LangGraph's long-term memory store over lamina memory (sync and async)."""

    supports_ttl = False

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
        self._default = default_scope(scope)

    def _reach(self, prefix: tuple[str, ...]) -> Reach:
        return Reach.of(prefix, self._default)

    # -- the operations ---------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._bridge.run(self.abatch(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._bridge.call(self._batch(list(ops)))

    async def _batch(self, ops: list[Op]) -> list[Result]:
        """As LangGraph's stores: the writes (the last of each key's) are checked first and
        made last, so the reads see the store as it was before the batch."""
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(check_namespace(op.namespace), op.key)] = op
            elif isinstance(op, GetOp):
                check_namespace(op.namespace)
            elif isinstance(op, SearchOp):
                check_namespace(op.namespace_prefix)
                values.check_filter(op.filter)
            elif not isinstance(op, ListNamespacesOp):
                raise _bad(f"unknown store operation {type(op).__name__}")
        writes = [self._prepare(op) for op in puts.values()]
        wanted: dict[tuple[str, ...], list[str]] = {}
        for op in ops:
            if isinstance(op, GetOp):
                wanted.setdefault(op.namespace, []).append(op.key)
        got = {ns: await self._find(ns, list(dict.fromkeys(keys))) for ns, keys in wanted.items()}
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = got[op.namespace].get(op.key)
                results.append(_item(found[0]) if found else None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._namespaces(op))
            else:
                results.append(None)
        await self._write(writes)
        return results

    # -- reading ----------------------------------------------------------------------------

    def _listing(self, scope: Scope, filters: dict[str, Any]) -> dict[str, Any]:
        layer, ids = scope
        return {"layers": [layer], "filters": filters, "tenant_id": self._bridge.tenant_id, **ids}

    async def _scoped(self, scope: Scope, filters: dict[str, Any]) -> AsyncIterator[Found]:
        """The store's items in ``scope`` that ``filters`` select, newest first."""
        cursor: str | None = None
        while True:
            page = await self._bridge.ms.memory.list(
                limit=min(PAGE, self._bridge.ms.settings.memory.max_limit),
                cursor=cursor,
                **self._listing(scope, filters),
            )
            for entry in page.items:
                yield _found(entry)
            cursor = page.next_cursor
            if not cursor or not page.items:
                return

    async def _wide(self, reach: Reach) -> AsyncIterator[Found]:
        """The store's items in the memories of ``reach.layers`` (every layer: none given)
        whose identifiers include ``reach.ids``, oldest first; as a scope's reads, only
        memories valid now (an export gives the invalidated ones too)."""
        now = datetime.now(UTC)
        ids: Any = reach.ids
        pages = self._bridge.ms.memory.export_pages(
            layers=list(reach.layers) or None,
            tenant_id=self._bridge.tenant_id,
            batch_size=PAGE,
            **ids,
        )
        async for page in pages:
            for record in page:
                meta = record.get("metadata", {}).get(META)
                if isinstance(meta, dict) and meta.get("store") is True and _valid(record, now):
                    yield _found(record)

    async def _items(
        self, prefix: tuple[str, ...], filters: dict[str, Any]
    ) -> AsyncIterator[Found]:
        """The items under ``prefix`` (``filters``: lamina filters narrowing the read)."""
        reach = self._reach(prefix)
        if reach.nowhere:
            return
        if reach.scope is not None:
            narrow = {f"{META}.store": True, **filters}
            if prefix:
                narrow[f"{META}.prefixes"] = {"contains": ".".join(prefix)}
            async for found in self._scoped(reach.scope, narrow):
                if under(tuple(found.meta["namespace"]), prefix):
                    yield found
            return
        async for found in self._wide(reach):
            if under(tuple(found.meta["namespace"]), prefix):
                yield found

    async def _find(self, namespace: tuple[str, ...], keys: list[str]) -> dict[str, list[Found]]:
        """The stored items of ``keys`` in ``namespace``, newest first by key."""
        reach = self._reach(namespace)
        out: dict[str, list[Found]] = {}
        # A key no store can hold names nothing stored.
        keys = [k for k in keys if isinstance(k, str) and storable(k)]
        if reach.scope is None:
            return out
        path = ".".join(namespace)
        for start in range(0, len(keys), KEYS):
            chunk = keys[start : start + KEYS]
            filters = {
                f"{META}.store": True,
                f"{META}.path": path,
                f"{META}.key": chunk[0] if len(chunk) == 1 else {"in": chunk},
            }
            async for found in self._scoped(reach.scope, filters):
                if found.meta["path"] == path and found.meta["key"] in chunk:
                    out.setdefault(found.meta["key"], []).append(found)
        for items in out.values():
            items.sort(key=lambda f: f.updated_at, reverse=True)
        return out

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        """Best first with a query (lamina's hybrid search, near-duplicates kept), else in
        no defined order (newest first within one scope)."""
        prefix, wanted = op.namespace_prefix, op.offset + op.limit
        if op.limit <= 0 or op.offset < 0:
            return []
        narrow = values.pushdown(op.filter, f"{META}.value")
        if op.query:
            most = self._bridge.ms.settings.memory.max_limit
            if wanted > most:
                raise _bad(
                    f"a search with a query reaches the best {most} items at most "
                    f"(memory.max_limit); offset + limit is {wanted}",
                    limit=op.limit,
                    offset=op.offset,
                )
            found = await self._ranked(op, narrow, wanted)
            return [_item(f, score) for f, score in found[op.offset : wanted]]
        kept: list[SearchItem] = []
        async for found_item in self._items(prefix, narrow):
            item = _item(found_item)
            if values.matches(item.value, op.filter):
                kept.append(item)
                if len(kept) == wanted:
                    break
        return kept[op.offset :]

    async def _ranked(
        self, op: SearchOp, narrow: dict[str, Any], wanted: int
    ) -> list[tuple[Found, float]]:
        """The items under the prefix that pass the filter, best first (then by namespace
        and key): searched in each scope that holds some (one, when the prefix names it)."""
        prefix = op.namespace_prefix
        reach = self._reach(prefix)
        scopes: dict[tuple[str, tuple[tuple[str, str], ...]], Scope] = {}
        if reach.scope is not None:
            scopes[(reach.scope[0], ())] = reach.scope
        elif not reach.nowhere:
            async for found in self._wide(reach):
                if under(tuple(found.meta["namespace"]), prefix):
                    layer, ids = found.scope
                    scopes.setdefault((layer, tuple(sorted(ids.items()))), found.scope)
        filters = {f"{META}.store": True, **narrow}
        if prefix:
            filters[f"{META}.prefixes"] = {"contains": ".".join(prefix)}
        out: list[tuple[Found, float]] = []
        for scope in scopes.values():
            out += await self._ranked_in(scope, op, filters, wanted)
        # Equal scores in a stable order, so that pages (offset, limit) never overlap.
        out.sort(key=lambda pair: (-pair[1], pair[0].meta["path"], pair[0].meta["key"]))
        return out

    async def _ranked_in(
        self, scope: Scope, op: SearchOp, filters: dict[str, Any], wanted: int
    ) -> list[tuple[Found, float]]:
        most = self._bridge.ms.settings.memory.max_limit
        limit = wanted
        while True:
            hits = await self._bridge.ms.memory.search(
                op.query or "",
                limit=limit,
                threshold=0.0,
                collapse=False,
                **self._listing(scope, filters),
            )
            kept = []
            for hit in hits:
                found = _found(hit.memory)
                if under(tuple(found.meta["namespace"]), op.namespace_prefix) and values.matches(
                    _item(found).value, op.filter
                ):
                    kept.append((found, hit.score))
            if len(hits) < limit or limit >= most:
                return kept
            # Enough, unless items as good as the last one wanted may lie past this page.
            if len(kept) >= wanted and kept[wanted - 1][1] > hits[-1].score:
                return kept
            limit = min(most, limit * 4)

    async def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]
        for _, path in conditions:
            check_namespace(tuple(label for label in path if label != "*"))
        prefix = fixed_prefix(conditions)
        seen: set[tuple[str, ...]] = set()
        async for found in self._items(prefix, {}):
            namespace = tuple(found.meta["namespace"])
            if all(matches(namespace, kind, path) for kind, path in conditions):
                seen.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(seen)[op.offset : op.offset + op.limit]

    # -- writing ----------------------------------------------------------------------------

    def _prepare(self, op: PutOp) -> tuple[PutOp, Scope, dict[str, Any] | None, str]:
        """The scope, metadata and text a put stores (None, "": it deletes)."""
        if op.value is None:
            return op, self._reach(op.namespace).scope or ("", {}), None, ""
        scope = self._reach(op.namespace).writable(op.namespace)
        if not isinstance(op.value, Mapping):
            raise _bad("a LangGraph store value must be a dict", key=op.key)
        if not isinstance(op.key, str) or not storable(op.key):
            raise _bad(
                "a LangGraph store key must be a string (valid Unicode without NUL "
                f"characters), got {op.key!r}"
            )
        encoded, types = values.encode(op.value)
        namespace = op.namespace
        meta = {
            "store": True,
            "namespace": list(namespace),
            "path": ".".join(namespace),
            "prefixes": [".".join(namespace[:n]) for n in range(1, len(namespace) + 1)],
            "key": op.key,
            "value": encoded,
        }
        if types:
            meta["types"] = types
        return op, scope, {META: meta}, values.content(op.value, encoded)

    async def _write(self, writes: list[tuple[PutOp, Scope, dict[str, Any] | None, str]]) -> None:
        """Each put's item replaces the key's (one memory, updated in place; any other the
        key has is deleted), or is added; a None value deletes the key's."""
        memory = self._bridge.ms.memory
        tenant = self._bridge.tenant_id
        by_namespace: dict[tuple[str, ...], list[str]] = {}
        for op, _, _, _ in writes:
            by_namespace.setdefault(op.namespace, []).append(op.key)
        stored: dict[tuple[tuple[str, ...], str], list[Found]] = {}
        for namespace, keys in by_namespace.items():
            for key, items in (await self._find(namespace, keys)).items():
                stored[(namespace, key)] = items
        doomed: list[str] = []
        updates: list[tuple[str, str, dict[str, Any]]] = []
        new: list[dict[str, Any]] = []
        for op, (layer, ids), metadata, text in writes:
            items = stored.get((op.namespace, op.key), [])
            if metadata is None:
                doomed += [f.id for f in items]
            elif items:
                updates.append((items[0].id, text, metadata))
                doomed += [f.id for f in items[1:]]
            else:
                new.append({"content": text, "layer": layer, "metadata": metadata, **ids})
        if new:
            await memory.bulk_add(new, tenant_id=tenant, keyed=True)
        for memory_id, text, metadata in updates:
            await memory.update(memory_id, content=text, metadata=metadata, tenant_id=tenant)
        if doomed:
            await memory.bulk_delete(doomed, tenant_id=tenant)
