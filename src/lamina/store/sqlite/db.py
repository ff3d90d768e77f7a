"""SQLite plumbing for the embedded store: connections, migrations, transactions, errors,
and the SQLite side of the shared SQL (its dialect, and programs run in a worker thread)."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.timing import content_key
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.meta import pending_migrations
from lamina.store.sql.program import Lock, Program, Step, drive

log = logging.getLogger(__name__)
T = TypeVar("T")

_TRANSIENT = ("locked", "busy", "disk i/o", "unable to open")
#: The ``store_meta`` key marking a file to rebuild at the next close (``Database.forgot``).
REBUILD = "rebuild_pending"


def translate(exc: sqlite3.Error, operation: str) -> LaminaError:
    """A LaminaError for a database failure; transient ones are retryable."""
    text = str(exc).lower()
    if isinstance(exc, sqlite3.IntegrityError) and "memories.id" in text:
        return LaminaError(ErrorCode.INVALID_ARGUMENT, "a memory with this id already exists")
    if isinstance(exc, sqlite3.OperationalError) and any(t in text for t in _TRANSIENT):
        return LaminaError(
            ErrorCode.PROVIDER_ERROR, f"database busy or unavailable during {operation}: {exc}"
        )
    if "not a database" in text or "malformed" in text:
        return LaminaError(
            ErrorCode.PROVIDER_ERROR,
            f"the database file is damaged ({exc}); restore it from a backup",
            retryable=False,
        )
    log.error("database error during %s: %s", operation, exc)
    return LaminaError(ErrorCode.INTERNAL_ERROR, f"database error during {operation}")


class Database:
    """One SQLite file in WAL mode; one connection per thread, all closed on ``close``."""

    def __init__(
        self, path: Path, functions: dict[str, tuple[int, Any]], busy_timeout: float = 30.0
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._functions = functions
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._closed = False
        #: Calls running in worker threads; ``close`` waits for them (a task cancelled while
        #: its statement runs leaves the thread running: closing its connection under it
        #: would crash the process).
        self._running = 0
        self._idle = threading.Condition(self._guard)
        #: Something was deleted since the file was opened: ``close`` rebuilds it.
        self._forgot = False

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise LaminaError(ErrorCode.INTERNAL_ERROR, "the store has been shut down")
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        # Deleted content is overwritten in the file, not left in free pages (forgetting).
        conn.execute("PRAGMA secure_delete=ON")
        for name, (nargs, fn) in self._functions.items():
            conn.create_function(name, nargs, fn, deterministic=True)
        with self._guard:
            self._all.append(conn)
        self._local.conn = conn
        return conn

    def write_transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """An IMMEDIATE transaction: writers queue on the file lock, never half-commit."""
        return self._transaction("BEGIN IMMEDIATE")

    def snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: several statements see one consistent state."""
        return self._transaction("BEGIN")

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        conn = self.connection()
        conn.execute(begin)
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def migrate(self, target: int | None = None) -> int:
        """Apply pending migrations in order (up to ``target``, tests pin older schemas);
        returns the schema version."""
        with self.write_transaction() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            version = max(done, default=0)
            for migration in pending_migrations("lamina.store.sqlite.migrations", done, target):
                log.info("applying migration %s to %s", migration.name, self.path)
                for statement in _statements(migration.sql):
                    conn.execute(statement)
                if migration.number == _CONTENT_KEY_MIGRATION:
                    _fill_content_keys(conn)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, datetime('now'))",
                    (migration.number, migration.name),
                )
                version = max(version, migration.number)
        return version

    # -- running work in a worker thread ----------------------------------------------------

    async def call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread, database errors translated."""
        return await asyncio.to_thread(self._call, operation, fn, *args)

    def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        with self._guard:
            self._running += 1
        try:
            return fn(*args)
        except sqlite3.Error as exc:
            raise translate(exc, operation) from exc
        finally:
            with self._guard:
                self._running -= 1
                self._idle.notify_all()

    async def read(
        self, tenant_id: str | None, operation: str, program: Program[T], *, snapshot: bool = False
    ) -> T:
        """Run a shared SQL program that only reads (lamina.store.sql.program.Executor)."""
        return await self.call(operation, self._read, program, snapshot)

    def _read(self, program: Program[T], snapshot: bool) -> T:
        if not snapshot:
            return run(self.connection(), program)
        with self.snapshot() as conn:
            return run(conn, program)

    async def write(self, tenant_id: str | None, operation: str, program: Program[T]) -> T:
        """Run a shared SQL program in an IMMEDIATE transaction."""
        return await self.call(operation, self._write, program)

    def _write(self, program: Program[T]) -> T:
        with self.write_transaction() as conn:
            return run(conn, program)

    def forgot(self) -> bool:
        """Note a deletion: ``close`` rebuilds the file (``VACUUM``). ``secure_delete`` zeroes
        what a delete frees, but a page SQLite rebalanced can keep, in its unused middle, old
        bytes of rows moved to another page; only rebuilding the file drops them. True the
        first time: the caller then marks the file (``REBUILD``), so that a process stopped
        before it closes leaves the rebuild to the next one that opens the file."""
        with self._guard:
            first, self._forgot = not self._forgot, True
        return first

    def close(self) -> None:
        with self._guard:
            self._closed = True
            if not self._idle.wait_for(lambda: self._running == 0, self.busy_timeout + 5):
                log.warning("closing %s while a call still runs", self.path)
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:  # pragma: no cover - closing is best effort
                    log.warning("closing a connection to %s failed", self.path)
            self._all.clear()
            if self._forgot:
                self._settle()
        self._local = threading.local()

    def _settle(self) -> None:
        """After a deletion, once every connection is closed: the file rebuilt (``VACUUM``)
        and the log emptied into it, on a connection of its own (no statement of another
        in progress), so that no copy of a deleted text is left in either. Another process
        reading the file can prevent it: then the next close after a deletion does it."""
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:  # pragma: no cover - the file was there a moment ago
            log.warning("reopening %s to rebuild it failed: %s", self.path, exc)
            return
        try:
            conn.execute("PRAGMA secure_delete=ON")
            started = time.perf_counter()
            conn.execute("VACUUM")
            conn.execute("DELETE FROM store_meta WHERE key = ?", (REBUILD,))
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            log.info("rebuilt %s in %.2f s", self.path, time.perf_counter() - started)
        except sqlite3.Error as exc:
            log.warning("rebuilding %s at close failed: %s", self.path, exc)
        finally:
            conn.close()


#: The migration after which rows stored before it get their content key from Python.
_CONTENT_KEY_MIGRATION = 9


def _fill_content_keys(conn: sqlite3.Connection) -> None:
    """The exact-duplicate key of every memory but conversation messages stored before
    migration 9 (lamina.memory.timing.content_key), in the migration's transaction."""
    found = conn.execute(
        "SELECT pk, content FROM memories WHERE conversation_id IS NULL AND "
        "json_type(metadata, '$.conversation') IS NULL"
    ).fetchall()
    conn.executemany(
        "UPDATE memories SET content_key = ? WHERE pk = ?",
        [(content_key(content), pk) for pk, content in found],
    )


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (sqlite3.complete_statement handles triggers)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer and line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


def run(conn: sqlite3.Connection, program: Program[T]) -> T:
    """Run a shared SQL program on ``conn`` (in the calling thread)."""

    def execute(step: Step | Lock) -> Any:
        if isinstance(step, Lock):
            return None  # write transactions are IMMEDIATE: they already run one at a time
        sql = step.sql.replace("%s", "?")
        if step.fetch == "many":
            conn.executemany(sql, step.params)
            return None
        cursor = conn.execute(sql, step.params)
        if step.fetch == "rows":
            return cursor.fetchall()
        if step.fetch == "row":
            return cursor.fetchone()
        return cursor.rowcount

    return drive(program, execute)


#: One encoder for every value (``json.dumps`` with options builds one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    """JSON text as every column of the SQLite file holds it."""
    return _ENCODER.encode(value)


def timestamp(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


class SQLiteDialect(Dialect):
    seq = "pk"
    tenant_in_seq_order = "+tenant_id"

    def unindexed(self, column: str) -> str:
        return f"+{column}"

    graph_id = "pk"
    true = "1"
    false = "0"
    greatest = "max"
    strpos = "instr"
    for_update = ""
    no_limit = -1

    def is_true(self, column: str) -> str:
        return f"{column} = 1"

    def json(self, value: Any) -> str:
        return dumps(value)

    def from_json(self, value: Any) -> Any:
        return json.loads(value)

    def time(self, value: datetime) -> str:
        return timestamp(value)

    def from_time(self, value: Any) -> datetime:
        return datetime.fromisoformat(value)

    def vector(self, value: Vector) -> bytes:
        return np.asarray(value, dtype=np.float32).tobytes()

    def from_vector(self, value: Any) -> Vector | None:
        return None if value is None else np.frombuffer(value, dtype=np.float32)

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def json_string(self, column: str, *path: str) -> str:
        at = "$." + ".".join(path)
        return (
            f"CASE json_type({column}, '{at}') WHEN 'text' THEN json_extract({column}, '{at}') END"
        )

    def tags_any(self, column: str, tags: Sequence[str]) -> tuple[str, list[Any]]:
        marks = ", ".join("%s" for _ in tags)
        return (
            f"EXISTS (SELECT 1 FROM json_each({column}) WHERE value IN ({marks}))",  # noqa: S608
            list(tags),
        )

    def index_columns(self, content: str) -> dict[str, Any]:
        return self.memory_terms(content)


SQLITE = SQLiteDialect()
