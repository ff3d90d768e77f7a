"""PostgreSQL plumbing: the URL check, the connection pool and per-tenant transactions,
migrations, error translation, and the PostgreSQL side of the shared SQL (its dialect, and
programs awaited statement by statement)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.timing import content_key
from lamina.store.postgres.filters import from_pg_vector, register_vectors, to_pg_vector
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.meta import pending_migrations
from lamina.store.sql.program import Lock, Program, Step, count, drive_async

log = logging.getLogger(__name__)
T = TypeVar("T")

MIGRATION_LOCK = 72_616_201  # pg_advisory_xact_lock key for schema migrations
_TRANSIENT = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.QueryCanceled,
    pg_errors.AdminShutdown,
    pg_errors.CannotConnectNow,
)


#: Operations on the schema, where a unique violation is no caller's duplicate id.
_SCHEMA_OPERATIONS = frozenset({"initialize", "migrate"})


def check_url(url: str) -> str:
    """CONFIGURATION_ERROR unless ``url`` is a well-formed PostgreSQL URL."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"not a PostgreSQL URL: {url!r} (expected postgresql://user@host:port/database)",
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        conninfo_to_dict(url)
    except ValueError as exc:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR, f"malformed PostgreSQL URL {url!r}: {exc}"
        ) from None
    except psycopg.ProgrammingError as exc:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR, f"malformed PostgreSQL URL: {exc}"
        ) from None
    return url


def translate(exc: Exception, operation: str) -> LaminaError:
    if isinstance(exc, LaminaError):
        return exc
    if isinstance(exc, (*_TRANSIENT, PoolTimeout, psycopg.OperationalError)):
        return LaminaError(
            ErrorCode.PROVIDER_ERROR, f"PostgreSQL unavailable during {operation}: {exc}"
        )
    if isinstance(exc, pg_errors.InsufficientPrivilege | pg_errors.InvalidSchemaName):
        return LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"the database user lacks a privilege (or a schema it may use) needed for "
            f"{operation}: {exc}",
        )
    if isinstance(exc, pg_errors.UniqueViolation):
        if operation in _SCHEMA_OPERATIONS:
            log.error("PostgreSQL error during %s: %s", operation, exc)
            return LaminaError(ErrorCode.INTERNAL_ERROR, f"database error during {operation}")
        return LaminaError(ErrorCode.INVALID_ARGUMENT, "a memory with this id already exists")
    log.error("PostgreSQL error during %s: %s", operation, exc)
    return LaminaError(ErrorCode.INTERNAL_ERROR, f"database error during {operation}")


class Database:
    """A pool of connections as lamina_app; every call is one transaction that first sets
    ``lamina.tenant_id``, and the row-level security policies hide every other tenant."""

    def __init__(
        self,
        url: str,
        *,
        pool_min: int,
        pool_max: int,
        statement_timeout_ms: int,
        connect_timeout: float,
    ) -> None:
        self.url = check_url(url)
        self.connect_timeout = connect_timeout
        self._statement_timeout_ms = statement_timeout_ms
        self._pool_min, self._pool_max = pool_min, pool_max
        self._pool = self._new_pool()

    def _new_pool(self) -> AsyncConnectionPool[Any]:
        return AsyncConnectionPool(
            self.url,
            min_size=self._pool_min,
            max_size=self._pool_max,
            open=False,
            timeout=self.connect_timeout,
            configure=self._configure,
            kwargs={"connect_timeout": max(1, int(self.connect_timeout))},
        )

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.set_autocommit(True)
        await register_vectors(conn)
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        await conn.execute("SET ROLE lamina_app")
        await conn.execute(f"SET statement_timeout = {int(self._statement_timeout_ms)}")
        await conn.set_autocommit(False)

    async def open(self) -> None:
        if self._pool.closed:
            self._pool = self._new_pool()
        try:
            await self._pool.open(wait=True, timeout=self.connect_timeout)
        except BaseException:
            await self._pool.close()
            raise

    async def close(self) -> None:
        await self._pool.close()

    async def connect(self, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        """A connection of its own as the connecting user (migrations, bulk loading)."""
        return await psycopg.AsyncConnection.connect(
            self.url, connect_timeout=max(1, int(self.connect_timeout)), **kwargs
        )

    @asynccontextmanager
    async def transaction(
        self,
        tenant_id: str | None,
        operation: str,
        *,
        pipeline: bool = False,
        snapshot: bool = False,
    ) -> AsyncIterator[Any]:
        """One transaction as lamina_app, scoped to ``tenant_id``. With ``pipeline`` the
        connection is in pipeline mode: statements go out as they are executed and the
        client waits only when it fetches a result (BEGIN, the tenant and the statements
        before the first fetch cost one round trip). With ``snapshot`` every statement sees
        the database as the first one did (REPEATABLE READ)."""
        try:
            async with (
                self._pool.connection() as conn,
                conn.pipeline() if pipeline else nullcontext(),
                conn.transaction(),
            ):
                if snapshot:
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                if tenant_id is not None:
                    await conn.execute(
                        "SELECT set_config('lamina.tenant_id', %s, true)", (tenant_id,)
                    )
                yield conn
        except LaminaError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise translate(exc, operation) from exc

    async def read(
        self, tenant_id: str | None, operation: str, program: Program[T], *, snapshot: bool = False
    ) -> T:
        """Run a shared SQL program (lamina.store.sql.program.Executor)."""
        return await self.write(tenant_id, operation, program)

    async def write(self, tenant_id: str | None, operation: str, program: Program[T]) -> T:
        async with self.transaction(tenant_id, operation) as conn:
            return await run(conn, program)

    async def migrate(self, target: int | None, dimensions: int, model_id: str) -> int:
        """Apply pending migrations as the connecting user, one process at a time; returns
        the schema version."""
        async with await self.connect() as conn:
            available = await (
                await conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            ).fetchone()
            if available is None:
                raise LaminaError(
                    ErrorCode.CONFIGURATION_ERROR,
                    "the PostgreSQL extension 'vector' (pgvector) is not installed on the "
                    "server: install the postgresql-<version>-pgvector package, or build it "
                    "from source (scripts/pg-setup does this on Debian)",
                )
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                    "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                )
                rows = await (
                    await conn.execute("SELECT version FROM schema_migrations")
                ).fetchall()
                done = {r[0] for r in rows}
                version = max(done, default=0)
                pending = pending_migrations("lamina.store.postgres.migrations", done, target)
                for migration in pending:
                    log.info("applying migration %s", migration.name)
                    if migration.number == _ROLE_MIGRATION:
                        await _make_app_role(conn)
                    sql = migration.sql.replace("{dimensions}", str(int(dimensions)))
                    await conn.execute(sql.encode())
                    if migration.number == _LEXICON_MIGRATION:
                        await _fill_lexicon(conn)
                    if migration.number == _CONTENT_KEY_MIGRATION:
                        await _fill_content_keys(conn)
                    if migration.number == _CONTEXT_VECTOR_MIGRATION:
                        await _fill_context_vectors(conn)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (migration.number, migration.name),
                    )
                    version = max(version, migration.number)
                existing = await (await conn.execute("SELECT key FROM store_meta")).fetchall()
                if ("embedding_model",) not in existing:
                    await conn.execute(
                        "INSERT INTO store_meta VALUES ('embedding_model', %s), "
                        "('embedding_dimensions', %s)",
                        (model_id, str(dimensions)),
                    )
        return version


#: The migration that creates lamina_app and makes the connecting user a member of it.
_ROLE_MIGRATION = 1


async def _make_app_role(conn: Any) -> None:
    """Create ``lamina_app`` and join it before migration 1 does. A role belongs to the
    whole server, not to one database, and the migration lock is per database: two stores
    on two databases of one server starting at once both create the role (or the
    membership), and the loser's statement fails with a unique violation. Each attempt runs
    in a savepoint; the loser finds the winner's role and membership on the next one."""
    for attempt in range(3):
        try:
            async with conn.transaction():
                row = await (
                    await conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles u "
                        "ON u.oid = m.member WHERE m.roleid = r.oid AND u.rolname = "
                        "current_user) FROM pg_roles r WHERE r.rolname = 'lamina_app'"
                    )
                ).fetchone()
                if row is None:
                    await conn.execute("CREATE ROLE lamina_app NOLOGIN")
                if row is None or not row[0]:
                    await conn.execute("GRANT lamina_app TO CURRENT_USER")
            return
        except (pg_errors.UniqueViolation, pg_errors.DuplicateObject):
            if attempt == 2:
                raise


#: The migration after which rows stored before it get their keyword terms from Python.
_LEXICON_MIGRATION = 8
_FILL_BATCH = 1000
_FORCED = ("memories", "memory_terms", "memory_scope_stats")


async def _fill_lexicon(conn: Any) -> None:
    """Compute the keyword terms of every memory stored before migration 8 (the same
    analyser as the embedded store), inside the migration's transaction."""
    await _fill(
        conn,
        "SELECT tenant_id, seq, content, context FROM memories WHERE lexicon IS NULL",
        {"lexicon": "text", "term_count": "real"},
        lambda content, context: tuple(POSTGRES.memory_terms(content, context).values()),
    )


#: The migration after which rows stored before it get their content key from Python.
_CONTENT_KEY_MIGRATION = 11


async def _fill_content_keys(conn: Any) -> None:
    """The exact-duplicate key (lamina.memory.timing.content_key) of every memory but
    conversation messages stored before migration 11, inside the migration's transaction.
    The key is no indexed word: the postings update trigger stays out of it."""
    await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_terms_update")
    await _fill(
        conn,
        "SELECT tenant_id, seq, content FROM memories WHERE conversation_id IS NULL "
        "AND NOT metadata ? 'conversation'",
        {"content_key": "text"},
        lambda content: (content_key(content),),
    )
    await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_terms_update")


#: The migration after which neighbourhood vectors are copied from bytes to pgvector.
_CONTEXT_VECTOR_MIGRATION = 16


async def _fill_context_vectors(conn: Any) -> None:
    """Copy each memory's neighbourhood vector (float32 bytes) into the pgvector column of
    migration 16, the same floats, inside the migration's transaction; migration 17 types
    the column as ``embedding`` is typed. A neighbourhood of another size than the store's
    vectors (left by an interrupted re-embedding) stays empty: re-embedding renews it.

    No indexed word changes: the postings update trigger stays out of it. Every row written
    gets a new entry in each index of ``memories``; when that is a good part of the table,
    the vector index is dropped and built again once instead (as bulk loading does)."""
    await register_vectors(conn)
    row = await (
        await conn.execute(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
        )
    ).fetchone()
    dims = int(row[0]) if row else -1  # -1: dimensionless (a resize under way)
    size = "TRUE" if dims <= 0 else f"length(context_embedding) = {4 * dims}"
    async with _every_tenant(conn):  # counted across tenants
        counts = await (
            await conn.execute(
                f"SELECT count(*) FILTER (WHERE context_embedding IS NOT NULL AND {size}), "  # noqa: S608
                "count(*) FROM memories"
            )
        ).fetchone()
    filling, total = (int(counts[0]), int(counts[1])) if counts else (0, 0)
    if not filling:
        return
    indexed = await (
        await conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'memories_embedding'")
    ).fetchone()
    rebuild = indexed is not None and filling * 4 > total
    if rebuild:
        await conn.execute("DROP INDEX memories_embedding")
    await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_terms_update")
    await _fill(
        conn,
        "SELECT tenant_id, seq, context_embedding FROM memories "  # noqa: S608
        f"WHERE context_embedding IS NOT NULL AND {size}",
        {"context_vector": "vector"},
        lambda blob: (to_pg_vector(np.frombuffer(blob, dtype=np.float32)),),
    )
    await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_terms_update")
    if rebuild:
        await conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
        await conn.execute(
            "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops)"
        )


@asynccontextmanager
async def _every_tenant(conn: Any) -> AsyncIterator[None]:
    """Row-level security lifted for the owner (it would hide every row from a migration),
    and forced again after."""
    for table in _FORCED:
        await conn.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    yield
    for table in _FORCED:
        await conn.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


async def _fill(
    conn: Any, select: str, columns: dict[str, str], values: Callable[..., tuple[Any, ...]]
) -> None:
    """Set ``columns`` (name → PostgreSQL type) of every row ``select`` finds (tenant_id,
    seq, then the arguments of ``values``) to ``values(*rest)``: one UPDATE statement per
    batch of rows, its values passed as arrays. Row-level security is lifted for the owner
    meanwhile (it would hide every row) and forced again after."""
    names = list(columns)
    arrays = ", ".join(f"%s::{columns[n]}[]" for n in names)
    sets = ", ".join(f"{n} = v.{n}" for n in names)
    update = (
        f"UPDATE memories m SET {sets} FROM unnest(%s::text[], %s::bigint[], {arrays}) "  # noqa: S608
        f"AS v (tenant_id, seq, {', '.join(names)}) "
        "WHERE m.tenant_id = v.tenant_id AND m.seq = v.seq"
    )
    async with _every_tenant(conn), conn.cursor(name="lamina_fill") as reader:
        await reader.execute(select)
        while found := await reader.fetchmany(_FILL_BATCH):
            computed = [values(*r[2:]) for r in found]
            await conn.execute(
                update,
                (
                    [r[0] for r in found],
                    [r[1] for r in found],
                    *([c[i] for c in computed] for i in range(len(names))),
                ),
            )


async def run(conn: Any, program: Program[T], first: Step | Lock | None = None) -> T:
    """Run a shared SQL program on ``conn``, awaiting each statement (``first``: the step
    the caller already advanced it to)."""

    async def execute(step: Step | Lock) -> Any:
        if isinstance(step, Lock):
            kind = "pg_advisory_xact_lock_shared" if step.shared else "pg_advisory_xact_lock"
            await conn.execute(
                f"SELECT {kind}(hashtextextended(%s, {int(step.space)}))", (step.key,)
            )
            return None
        if step.fetch == "many":
            async with conn.cursor() as cur:
                await cur.executemany(step.sql, step.params)
            return None
        cursor = await conn.execute(step.sql, step.params, binary=step.binary)
        if step.fetch == "rows":
            return await cursor.fetchall()
        if step.fetch == "row":
            return await cursor.fetchone()
        return cursor.rowcount

    return await drive_async(program, execute, first)


#: The PostgreSQL type of each column ``PostgresDialect.insert`` fills (memories and
#: memory_history); a column missing here is text.
_COLUMN_TYPES = {
    "identifiers": "jsonb",
    "metadata": "jsonb",
    "old_metadata": "jsonb",
    "new_metadata": "jsonb",
    "embedding": "vector",
    "context_embedding": "vector",
    "term_count": "real",
    "conversation_position": "bigint",
    **dict.fromkeys(
        ("created_at", "updated_at", "event_at", "valid_from", "valid_until", "expires_at", "at"),
        "timestamptz",
    ),
}


def _unnest(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> tuple[str, list[list[Any]]]:
    """``unnest(...)`` of one array parameter per column of ``names``, of the column's type,
    and those arrays (the columns of ``rows``). ``%b``: arrays in binary (text arrays would
    format every float of every vector)."""
    arrays = ", ".join(f"%b::{_COLUMN_TYPES.get(n, 'text')}[]" for n in names)
    return f"unnest({arrays})", [list(column) for column in zip(*rows, strict=True)]


class PostgresDialect(Dialect):
    memory_term_count = True
    seq = "seq"
    graph_id = "id"
    true = "true"
    false = "false"
    greatest = "greatest"
    strpos = "strpos"
    for_update = " FOR UPDATE"
    no_limit = None

    def insert(self, table: str, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> Step:
        """One INSERT of every row, each column passed as one array (``unnest``): the
        statement triggers (keyword postings) run once for all the rows, and the client
        adapts a few arrays instead of a parameter per value."""
        source, arrays = _unnest(names, rows)
        return count(
            f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM {source}",  # noqa: S608
            *arrays,
        )

    def update(
        self,
        table: str,
        names: Sequence[str],
        keys: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> Step:
        """One UPDATE of every row from arrays (``unnest``), as ``insert``: the statement
        triggers (keyword postings) run once for all the rows, not once a row (renewing
        the neighbourhoods of 1,000 imported turns: one statement instead of 1,000)."""
        columns = [*names, *keys]
        source, arrays = _unnest(columns, rows)
        sets = ", ".join(f"{name} = v.{name}" for name in names)
        where = " AND ".join(f"t.{key} = v.{key}" for key in keys)
        return count(
            f"UPDATE {table} AS t SET {sets} FROM {source} "  # noqa: S608
            f"AS v({', '.join(columns)}) WHERE {where}",
            *arrays,
        )

    def is_true(self, column: str) -> str:
        return column

    def json(self, value: Any) -> Jsonb:
        return Jsonb(value)

    def from_json(self, value: Any) -> Any:
        return value

    def time(self, value: datetime) -> datetime:
        return value

    def from_time(self, value: Any) -> datetime:
        """In UTC, as the embedded store gives it: whatever the server's TimeZone, a day
        (the date signal of search, for one) is the same day on both stores."""
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    def vector(self, value: Vector) -> Any:
        return to_pg_vector(value)

    def from_vector(self, value: Any) -> Vector | None:
        return from_pg_vector(value)

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(%s)", [list(values)]

    def json_text(self, column: str, key: str) -> str:
        return f"{column} ->> '{key}'"

    def bytewise(self, column: str) -> str:
        return f'{column} COLLATE "C"'

    def json_string(self, column: str, *path: str) -> str:
        at = "{" + ",".join(path) + "}"
        return f"CASE WHEN jsonb_typeof({column} #> '{at}') = 'string' THEN {column} #>> '{at}' END"

    def tags_any(self, column: str, tags: Sequence[str]) -> tuple[str, list[Any]]:
        return f"{column} ?| %s", [list(tags)]


POSTGRES = PostgresDialect()
