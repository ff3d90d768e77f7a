"""Memories in the SQLite file: what differs from the shared SQL (lamina.store.sql).

SQLite holds everything durably; each process keeps an exact vector index and a BM25 keyword
index per scope in memory (indexes.py), loaded on first search and kept in step with every
committed write, its own or another process's: the reads repository searches them
(``SQLiteMemoryReads``) and the owners repository counts with them (``SQLiteOwners``).
Metadata filters run in SQL through the ``ms_match`` function (``metadata_filter``,
lamina.memory.filters semantics), and deleted text leaves the write-ahead log
(``WalCheckpoint``, what a delete settles with).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from lamina.memory.bm25 import KeywordScores
from lamina.memory.filters import Condition, MetadataFilter, matches
from lamina.memory.models import SearchMode
from lamina.memory.ports import LayerHits, LayerSearch
from lamina.store.sql.memory_reads import SqlMemoryReads, ranked_chunks
from lamina.store.sql.memory_rows import MemoryRows, Row
from lamina.store.sql.owners import SqlMemoryOwners
from lamina.store.sqlite.db import REBUILD, Database, dumps
from lamina.store.sqlite.indexes import SyncedIndexes
from lamina.store.sqlite.vector_index import PartitionKey

#: Rows read per round while filtering index hits.
_CHUNK = 256
#: A search's keyword side: the scope's BM25 scores and the rows of its best candidates.
_Keywords = tuple[KeywordScores, dict[int, Row]]


def _key(req: LayerSearch) -> PartitionKey:
    return (req.tenant_id, req.scope.layer.value, req.scope.key)


def _pool(req: LayerSearch) -> int:
    """Candidates taken from each side (vector, keyword) of a search."""
    return max(req.limit * 5, 50)


def _filter_json(flt: MetadataFilter) -> str:
    return dumps(
        {"tags": list(flt.tags), "c": [[list(c.path), c.op, c.value] for c in flt.conditions]}
    )


@lru_cache(maxsize=512)
def _filter_from_json(raw: str) -> MetadataFilter:
    data = json.loads(raw)
    conditions = tuple(
        Condition(tuple(path), op, tuple(value) if op == "in" else value)
        for path, op, value in data["c"]
    )
    return MetadataFilter(tuple(data["tags"]), conditions)


def _plain(text: str) -> bool:
    """Whether ``text`` is written the same inside any JSON text (no escapes in any mode)."""
    return all(" " <= c <= "~" and c not in '"\\' for c in text)


def _fragment(value: Any, *, quoted: bool = True) -> str | None:
    """Text the metadata's JSON must contain when a field equals ``value`` (None: no cheap
    certainty). Integers below 1e15 print their digits both as int and as float."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) < 10**15:
        return str(value)
    if isinstance(value, str) and value and _plain(value):
        return f'"{value}"' if quoted else value
    return None


def prefilter(flt: MetadataFilter) -> list[list[str]]:
    """Necessary conditions of ``flt`` on the metadata's JSON text: groups of fragments, one
    of each group contained in it. ``instr`` checks them in C before ``ms_match`` parses the
    row in Python: a selective filter then costs a scan of text, not of JSON."""
    groups: list[list[str]] = []
    tags = [_fragment(t) for t in flt.tags]
    if tags and None not in tags:
        groups.append([t for t in tags if t is not None])
    for cond in flt.conditions:
        values: list[Any] = []
        if cond.op == "eq":
            values = [cond.value]
        elif cond.op == "in":
            values = list(cond.value)
        elif cond.op == "contains":
            fragment = _fragment(cond.value, quoted=False)
            if fragment is not None:
                groups.append([fragment])
            continue
        # Every JSON text of the file is compact (``dumps``, and SQLite's own JSON functions):
        # a field equal to a value reads ``"name":value`` (field names are plain: filters.py).
        # Zero is the one number whose equal may print with a sign (-0.0): no name before it.
        # A number's digits end where the value does (``,`` or ``}``), or go on as a float's
        # (``5.0``): the name and that end make a selective check.
        name = f'"{cond.path[-1]}":'
        fragments = [_fragment(v) for v in values]
        if fragments and None not in fragments:
            group: list[str] = []
            for value, f in zip(values, [f for f in fragments if f is not None], strict=True):
                if f == "0":
                    group.append(f)
                elif isinstance(value, int) and not isinstance(value, bool):
                    group += [f"{name}{f}{end}" for end in (",", "}", ".")]
                else:
                    group.append(name + f)
            groups.append(group)
    return groups


def match_udf(metadata: str, flt: str) -> int:
    """``ms_match(metadata, filter)``: 1 when the metadata passes the filter."""
    return 1 if matches(_filter_from_json(flt), json.loads(metadata)) else 0


def metadata_filter(flt: MetadataFilter) -> tuple[str, list[Any]]:
    """The SQL condition of a non-empty metadata filter: the ``prefilter`` fragments, then
    ``ms_match``; and its parameters."""
    groups = prefilter(flt)
    checks = [" OR ".join(["instr(metadata, %s) > 0"] * len(g)) for g in groups]
    sql = " AND ".join([f"({c})" for c in checks] + ["ms_match(metadata, %s)"])
    return sql, [*(f for g in groups for f in g), _filter_json(flt)]


class WalCheckpoint:
    """What a delete settles with on SQLite (lamina.store.sql.deletion.Settle): deleted
    text leaves the write-ahead log too, and deleted vectors the saved graphs."""

    def __init__(self, db: Database, indexes: SyncedIndexes) -> None:
        self._db = db
        self._indexes = indexes

    async def __call__(self, deleted: int) -> None:
        """After a delete: copy the log into the file (where secure_delete zeroed the freed
        content) and empty the log, whose old pages still held the deleted text. A reader
        in the middle of a transaction (another process) can keep the log from emptying
        now; it empties at the next checkpoint. Closing the store then rebuilds the file
        (``Database.forgot``; the file is marked for it, should this process stop first)."""
        if deleted:
            await self._db.call("checkpoint", self._settle_deletion)

    def _settle_deletion(self) -> None:
        conn = self._db.connection()
        self._indexes.drop_saved()  # no saved vector graph keeps a deleted vector
        if self._db.forgot():
            conn.execute("INSERT OR REPLACE INTO store_meta VALUES (?, '1')", (REBUILD,))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class SQLiteOwners(SqlMemoryOwners):
    """The owners repository; the counts by layer come from the in-process indexes."""

    def __init__(self, rows: MemoryRows, db: Database, indexes: SyncedIndexes) -> None:
        super().__init__(rows)
        self._db = db
        self._indexes = indexes

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        def run() -> dict[str, int]:
            self._indexes.sync()
            return self._indexes.counts_by_layer(tenant_id)

        return await self._db.call("count_by_layer", run)


class SQLiteMemoryReads(SqlMemoryReads):
    """The reads repository, searching through the in-process indexes."""

    def __init__(self, rows: MemoryRows, db: Database, indexes: SyncedIndexes) -> None:
        super().__init__(rows)
        self._db = db
        self._indexes = indexes

    async def search(self, request: LayerSearch) -> LayerHits:
        """A hybrid search whose query is still being embedded does its keyword side
        meanwhile (``_keyword_side``), on the other core; the vector side then."""
        request = self._searchable(request)
        early: _Keywords | None = None
        soon = request.vector_soon
        if request.mode is SearchMode.HYBRID and soon is not None and not soon.done():
            early = await self._db.call("search", self._early, request)
        request = await request.resolved()
        return await self._db.call("search", self._search, request, early)

    def _candidate_rows(self, pks: Sequence[int], req: LayerSearch) -> dict[int, Row]:
        if not pks:
            return {}
        marks = ",".join("?" * len(pks))
        timing, params = self._rows.candidates(req)
        sql = (
            f"SELECT pk, {self._scoring_columns()} FROM memories "  # noqa: S608
            f"WHERE pk IN ({marks}) AND {timing.replace('%s', '?')}"
        )
        params = [*pks, *params]
        if not req.filter.empty:
            sql += " AND ms_match(metadata, ?)"
            params.append(_filter_json(req.filter))
        return {row[0]: row for row in self._db.connection().execute(sql, params)}

    def _passing(
        self,
        ranking: Callable[[int | None], Sequence[int]],
        req: LayerSearch,
        want: int,
        known: dict[int, Row],
    ) -> dict[int, Row]:
        """Rows of the first ``want`` of the ranking (best first) that pass the filter and
        the time window, read as ``ranked_chunks`` says. ``known``: rows that passed
        already (an earlier ranking's), not read again."""
        out: dict[int, Row] = {}
        for chunk in ranked_chunks(ranking, want, not req.filter.empty, out, _CHUNK):
            rows = self._candidate_rows([pk for pk in chunk if pk not in known], req)
            rows.update((pk, known[pk]) for pk in chunk if pk in known)
            for pk in chunk:
                if pk in rows and len(out) < want:
                    out[pk] = rows[pk]
        return out

    def _early(self, req: LayerSearch) -> _Keywords:
        self._indexes.sync()
        return self._keyword_side(req, {})

    def _keyword_side(self, req: LayerSearch, known: dict[int, Row]) -> _Keywords:
        """The BM25 scores of the scope and the rows of the ``_pool`` best by them that pass
        the filter and the time window (``known``: rows that passed already)."""
        keyword = self._indexes.keyword_scores(_key(req), list(req.terms))

        def best(cap: int | None) -> list[int]:
            return [pk for pk, _ in keyword.top(cap)]

        return keyword, self._passing(best, req, _pool(req), known)

    def _search(self, req: LayerSearch, early: _Keywords | None = None) -> LayerHits:
        """Candidates: the ``pool`` best by vector and the ``pool`` best by BM25 that pass
        the filter and the time window; every candidate is then scored on all parts
        (lamina.memory.scoring), and the whole rows of the hits read. ``early``: the
        keyword side, done already (``search``)."""
        self._indexes.sync()
        key = _key(req)
        found: dict[int, Row] = {}
        query = req.vector
        if query is not None and req.mode is not SearchMode.KEYWORD:

            def nearest(cap: int | None) -> Sequence[int]:
                return self._indexes.nearest(key, query, cap)

            found.update(self._passing(nearest, req, _pool(req), early[1] if early else found))
        keywords = {}
        if req.mode is not SearchMode.SEMANTIC:
            # The same candidates in the same order, whichever side was read first.
            keyword, passed = early or self._keyword_side(req, found)
            found.update(passed)
            keywords = keyword.parts(found)
        ranked = self._rank(req, found, keywords)
        keys = [key for _, key in ranked.hits]
        rows: dict[int, Row] = {}
        if keys:
            sql, params = self._hit_rows(req, keys)
            found_rows = self._db.connection().execute(sql.replace("%s", "?"), params)
            rows = {row[0]: row for row in found_rows}
        return self._hits(ranked, rows)
