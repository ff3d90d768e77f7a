"""Sessions and observational memory (lamina.observational.ports) in SQL, for both backends.

Writers of one session's messages take turns (a ``Lock`` on the session: message indexes
must not collide); everything else is one statement or one transaction.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Unpack

from lamina.errors import ErrorCode, LaminaError
from lamina.observational.models import Note, SessionMessage
from lamina.observational.ports import (
    GraphReach,
    NewGraph,
    NewMessage,
    NewNote,
    normalise_entity,
)
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.program import Executor, Lock, Program, count, every, many, row, rows
from lamina.store.sql.rows import NOTE, NoteRow
from lamina.store.sql.session_prompts import SqlSessionPrompts

SUMMARY_PREFIX = "[Compacted Summary]\n"

_MSG = "session_key, idx, role, content, tool_calls, token_count, created_at"
_INSERT_MESSAGE = (
    "INSERT INTO session_messages (tenant_id, session_key, idx, role, content, "
    "tool_calls, token_count, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


def _table(reflections: bool) -> str:
    return "reflections" if reflections else "observations"


class SqlSessions(SqlSessionPrompts):
    """The SessionStore protocol on one backend's executor and dialect (the base system
    prompts in session_prompts.py)."""

    def __init__(self, executor: Executor, dialect: Dialect) -> None:
        self._exec = executor
        self._d = dialect

    def _message(self, values: Sequence[Any]) -> SessionMessage:
        session_key, index, role, content, tool_calls, tokens, created = values
        return SessionMessage(
            session_key=session_key,
            index=index,
            role=role,
            content=content,
            tool_calls=list(self._d.from_json(tool_calls)),
            token_count=tokens,
            created_at=self._d.from_time(created),
        )

    def _note(self, values: Sequence[Any]) -> Note:
        r = NoteRow(*values)
        return Note(**r._replace(created_at=self._d.from_time(r.created_at))._asdict())

    def _session_lock(self, tenant_id: str, session_key: str) -> Lock:
        return Lock(f"{tenant_id}\n{session_key}", 1)

    # -- messages ---------------------------------------------------------------------------

    async def append_messages(
        self, tenant_id: str, session_key: str, messages: Sequence[NewMessage]
    ) -> list[SessionMessage]:
        return await self._exec.write(
            tenant_id, "append", self._append(tenant_id, session_key, list(messages))
        )

    def _append(
        self, tenant_id: str, session_key: str, messages: list[NewMessage]
    ) -> Program[list[SessionMessage]]:
        now = datetime.now(UTC)
        yield self._session_lock(tenant_id, session_key)
        top = yield row(
            "SELECT max(idx) FROM session_messages WHERE tenant_id = %s AND session_key = %s",
            tenant_id,
            session_key,
        )
        start = -1 if top is None or top[0] is None else int(top[0])
        stored = [
            SessionMessage(
                session_key=session_key,
                index=start + 1 + i,
                role=m.role,
                content=m.content,
                tool_calls=list(m.tool_calls),
                token_count=m.token_count,
                created_at=m.created_at or now,
            )
            for i, m in enumerate(messages)
        ]
        d = self._d
        yield many(
            _INSERT_MESSAGE,
            [
                (
                    *(tenant_id, session_key, m.index, m.role, m.content),
                    *(d.json(m.tool_calls), m.token_count, d.time(m.created_at)),
                )
                for m in stored
            ],
        )
        return stored

    async def list_messages(
        self, tenant_id: str, session_key: str, *, start: int = 0, limit: int | None = None
    ) -> list[SessionMessage]:
        read = every(
            self._message,
            f"SELECT {_MSG} FROM session_messages WHERE tenant_id = %s "  # noqa: S608
            "AND session_key = %s AND idx >= %s ORDER BY idx LIMIT %s",
            tenant_id,
            session_key,
            start,
            self._d.no_limit if limit is None else limit,
        )
        return await self._exec.read(tenant_id, "list messages", read)

    async def last_index(self, tenant_id: str, session_key: str) -> int:
        def read() -> Program[int]:
            found = yield row(
                "SELECT max(idx) FROM session_messages WHERE tenant_id = %s AND session_key = %s",
                tenant_id,
                session_key,
            )
            return -1 if found is None or found[0] is None else int(found[0])

        return await self._exec.read(tenant_id, "last index", read())

    async def delete_messages(self, tenant_id: str, session_key: str, start: int) -> int:
        def delete() -> Program[int]:
            yield self._session_lock(tenant_id, session_key)
            deleted = yield count(
                "DELETE FROM session_messages WHERE tenant_id = %s AND session_key = %s "
                "AND idx >= %s",
                tenant_id,
                session_key,
                start,
            )
            return int(deleted)

        return await self._exec.write(tenant_id, "delete messages", delete())

    async def compact_messages(
        self, tenant_id: str, session_key: str, up_to_index: int, summary: str, tokens: int
    ) -> SessionMessage:
        return await self._exec.write(
            tenant_id,
            "compact",
            self._compact(tenant_id, session_key, up_to_index, summary, tokens),
        )

    def _compact(
        self, tenant_id: str, session_key: str, up_to: int, summary: str, tokens: int
    ) -> Program[SessionMessage]:
        d = self._d
        key = (tenant_id, session_key)
        yield self._session_lock(tenant_id, session_key)
        found = yield row(
            "SELECT count(*) FROM session_messages WHERE tenant_id = %s AND session_key = %s",
            *key,
        )
        total = int(found[0]) if found else 0
        if up_to < 0 or (up_to >= total and not (up_to == 0 and total == 0)):
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"up_to_index {up_to} is out of range: the session has {total} message(s)",
                details={"up_to_index": up_to, "messages": total},
            )
        yield count(
            "DELETE FROM session_messages WHERE tenant_id = %s AND session_key = %s AND idx <= %s",
            *key,
            up_to,
        )
        first = yield row(
            "SELECT min(created_at) FROM session_messages WHERE tenant_id = %s "
            "AND session_key = %s",
            *key,
        )
        # Renumber the rest from 1 in two steps (negative first: no unique clash).
        shift = up_to if total else 0
        yield count(
            "UPDATE session_messages SET idx = -idx WHERE tenant_id = %s AND session_key = %s",
            *key,
        )
        yield count(
            "UPDATE session_messages SET idx = -idx - %s WHERE tenant_id = %s AND session_key = %s",
            shift,
            *key,
        )
        for table in ("observations", "reflections"):
            yield count(
                f"UPDATE {table} SET source_start = CASE WHEN source_end <= %s THEN 0 "  # noqa: S608
                f"ELSE {d.greatest}(source_start - %s, 1) END, source_end = CASE WHEN "
                "source_end <= %s THEN 0 ELSE source_end - %s END "
                "WHERE tenant_id = %s AND session_key = %s",
                up_to,
                shift,
                up_to,
                shift,
                *key,
            )
        earliest = None if first is None or first[0] is None else d.from_time(first[0])
        dated = earliest - timedelta(milliseconds=1) if earliest else datetime.now(UTC)
        message = SessionMessage(
            session_key=session_key,
            index=0,
            role="system",
            content=SUMMARY_PREFIX + summary,
            token_count=tokens,
            created_at=dated,
        )
        yield count(
            _INSERT_MESSAGE,
            tenant_id,
            session_key,
            0,
            "system",
            message.content,
            d.json([]),
            tokens,
            d.time(dated),
        )
        return message

    async def list_sessions(
        self, tenant_id: str, *, after: str | None = None, limit: int | None = None
    ) -> list[tuple[str, int]]:
        key = self._d.bytewise("session_key")
        read = every(
            lambda r: (str(r[0]), int(r[1])),
            "SELECT session_key, count(*) FROM session_messages WHERE tenant_id = %s "  # noqa: S608
            f"AND {key} > %s GROUP BY session_key ORDER BY {key} LIMIT %s",
            tenant_id,
            "" if after is None else after,
            self._d.no_limit if limit is None else limit,
        )
        return await self._exec.read(tenant_id, "list sessions", read)

    async def message_totals(
        self, tenant_id: str, session_key: str, observed_through: int
    ) -> tuple[int, int, int, int]:
        def read() -> Program[tuple[int, int, int, int]]:
            found = yield row(
                "SELECT count(*), coalesce(sum(token_count), 0), "
                "coalesce(sum(CASE WHEN idx > %s THEN 1 ELSE 0 END), 0), "
                "coalesce(sum(CASE WHEN idx > %s THEN token_count ELSE 0 END), 0) "
                "FROM session_messages WHERE tenant_id = %s AND session_key = %s",
                observed_through,
                observed_through,
                tenant_id,
                session_key,
            )
            assert found is not None
            return int(found[0]), int(found[1]), int(found[2]), int(found[3])

        return await self._exec.read(tenant_id, "message totals", read())

    # -- observations and reflections -------------------------------------------------------

    async def add_note(
        self, tenant_id: str, session_key: str, new: NewNote, *, replaces: Sequence[str] = ()
    ) -> Note:
        note = Note(
            id=str(uuid.uuid4()),
            session_key=session_key,
            content=new.content,
            token_count=new.token_count,
            generation=new.generation,
            source_start=new.source[0],
            source_end=new.source[1],
            created_at=datetime.now(UTC),
        )

        def write() -> Program[None]:
            values = (tenant_id, note.id, session_key, note.content, note.token_count)
            if note.generation == 0:
                yield count(
                    "INSERT INTO observations (tenant_id, id, session_key, content, token_count, "
                    "source_start, source_end, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    *values,
                    *new.source,
                    self._d.time(note.created_at),
                )
            else:
                yield count(
                    "INSERT INTO reflections (tenant_id, id, session_key, content, token_count, "
                    "generation, source_start, source_end, created_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    *values,
                    note.generation,
                    *new.source,
                    self._d.time(note.created_at),
                )
            if replaces:
                ids, params = self._d.any_of("id", list(replaces))
                for table in ("observations", "reflections"):
                    yield count(
                        f"DELETE FROM {table} WHERE tenant_id = %s AND {ids}",  # noqa: S608
                        tenant_id,
                        *params,
                    )

        await self._exec.write(tenant_id, "save note", write())
        return note

    async def list_notes(
        self, tenant_id: str, session_key: str, *, reflections: bool, limit: int | None = None
    ) -> list[Note]:
        columns = NOTE.format(generation="generation" if reflections else "0")

        def read() -> Program[list[Note]]:
            found = yield rows(
                f"SELECT {columns} FROM {_table(reflections)} WHERE tenant_id = %s "  # noqa: S608
                f"AND session_key = %s ORDER BY {self._d.seq} DESC LIMIT %s",
                tenant_id,
                session_key,
                self._d.no_limit if limit is None else limit,
            )
            return [self._note(r) for r in reversed(found)]

        return await self._exec.read(tenant_id, "list notes", read())

    async def delete_notes(self, tenant_id: str, session_key: str, *, reflections: bool) -> int:
        def delete() -> Program[int]:
            deleted = yield count(
                f"DELETE FROM {_table(reflections)} WHERE tenant_id = %s "  # noqa: S608
                "AND session_key = %s",
                tenant_id,
                session_key,
            )
            return int(deleted)

        return await self._exec.write(tenant_id, "delete notes", delete())

    async def observed_through(self, tenant_id: str, session_key: str) -> int:
        def read() -> Program[int]:
            found = yield row(
                "SELECT max(e) FROM (SELECT max(source_end) AS e FROM observations "
                "WHERE tenant_id = %s AND session_key = %s UNION ALL SELECT max(source_end) "
                "FROM reflections WHERE tenant_id = %s AND session_key = %s) ends",
                tenant_id,
                session_key,
                tenant_id,
                session_key,
            )
            return -1 if found is None or found[0] is None else int(found[0])

        return await self._exec.read(tenant_id, "observed through", read())

    # -- leases -----------------------------------------------------------------------------

    async def acquire_lease(
        self, tenant_id: str, session_key: str, owner: str, seconds: float
    ) -> bool:
        def take() -> Program[bool]:
            now = time.time()
            holder = yield rows(
                "INSERT INTO session_leases VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (tenant_id, session_key) DO UPDATE SET owner = excluded.owner, "
                "expires_at = excluded.expires_at WHERE session_leases.owner = excluded.owner "
                "OR session_leases.expires_at < %s RETURNING owner",
                tenant_id,
                session_key,
                owner,
                now + seconds,
                now,
            )
            return bool(holder and holder[0][0] == owner)

        return await self._exec.write(tenant_id, "lease", take())

    async def release_lease(self, tenant_id: str, session_key: str, owner: str) -> None:
        def release() -> Program[None]:
            yield count(
                "DELETE FROM session_leases WHERE tenant_id = %s AND session_key = %s "
                "AND owner = %s",
                tenant_id,
                session_key,
                owner,
            )

        await self._exec.write(tenant_id, "lease", release())

    # -- the entity graph -------------------------------------------------------------------

    async def add_graph(self, tenant_id: str, session_key: str, graph: NewGraph) -> tuple[int, int]:
        return await self._exec.write(
            tenant_id, "save graph", self._add_graph(tenant_id, session_key, graph)
        )

    def _entity(self, tenant_id: str, name: str, kind: str, now: Any) -> Program[tuple[int, int]]:
        """(the entity's key, 1 if it was created else 0)."""
        created = yield count(
            "INSERT INTO graph_entities (tenant_id, name, norm, type, created_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, norm) DO NOTHING",
            tenant_id,
            name,
            normalise_entity(name),
            kind,
            now,
        )
        found = yield row(
            f"SELECT {self._d.graph_id} FROM graph_entities WHERE tenant_id = %s AND norm = %s",  # noqa: S608
            tenant_id,
            normalise_entity(name),
        )
        return int(found[0]), int(created)

    def _add_graph(
        self, tenant_id: str, session_key: str, graph: NewGraph
    ) -> Program[tuple[int, int]]:
        now = self._d.time(datetime.now(UTC))
        new_entities = new_relations = 0
        for name, kind in graph.entities:
            _, created = yield from self._entity(tenant_id, name, kind, now)
            new_entities += created
        key = self._d.graph_id
        for source, relation, target in graph.relations:
            source_key, created = yield from self._entity(tenant_id, source, "", now)
            new_entities += created
            target_key, created = yield from self._entity(tenant_id, target, "", now)
            new_entities += created
            new_relations += yield count(
                f"INSERT INTO graph_relations (tenant_id, session_key, source_{key}, relation, "  # noqa: S608
                f"target_{key}, created_at) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                tenant_id,
                session_key,
                source_key,
                relation,
                target_key,
                now,
            )
        return new_entities, new_relations

    async def graph_neighbourhood(
        self, tenant_id: str, text: str, **reach: Unpack[GraphReach]
    ) -> list[tuple[str, str, str]]:
        session_key, depth, limit = reach["session_key"], reach["depth"], reach["limit"]
        k, session = self._d.graph_id, "" if session_key is None else " AND r.session_key = %s"
        extra: tuple[Any, ...] = () if session_key is None else (session_key,)
        sql = (
            f"WITH RECURSIVE walk(node, depth) AS (SELECT {k}, 0 FROM graph_entities "  # noqa: S608
            f"WHERE tenant_id = %s AND length(norm) >= 2 AND {self._d.strpos}(%s, "
            "' ' || norm || ' ') > 0 "
            f"UNION SELECT CASE WHEN r.source_{k} = w.node THEN r.target_{k} "
            f"ELSE r.source_{k} END, w.depth + 1 FROM walk w JOIN graph_relations r "
            f"ON r.tenant_id = %s AND (r.source_{k} = w.node OR r.target_{k} = w.node){session} "
            "WHERE w.depth < %s), "
            "near(node, depth) AS (SELECT node, min(depth) FROM walk GROUP BY node) "
            "SELECT s.name, r.relation, t.name, min(n.depth) AS d FROM near n "
            f"JOIN graph_relations r ON r.tenant_id = %s AND (r.source_{k} = n.node "
            f"OR r.target_{k} = n.node){session} "
            f"JOIN graph_entities s ON s.tenant_id = r.tenant_id AND s.{k} = r.source_{k} "
            f"JOIN graph_entities t ON t.tenant_id = r.tenant_id AND t.{k} = r.target_{k} "
            f"WHERE n.depth < %s GROUP BY r.{k}, s.name, r.relation, t.name "
            f"ORDER BY d, r.{k} LIMIT %s"
        )
        params = (tenant_id, f" {normalise_entity(text)} ", tenant_id, *extra, depth)
        params += (tenant_id, *extra, depth, limit)

        read = every(lambda r: (str(r[0]), str(r[1]), str(r[2])), sql, *params)
        return await self._exec.read(tenant_id, "graph", read)
