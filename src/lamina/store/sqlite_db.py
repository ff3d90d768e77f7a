"""SQLite plumbing for the embedded store: connections, migrations, transactions, errors."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from lamina.errors import ErrorCode, LaminaError

log = logging.getLogger(__name__)

_TRANSIENT = ("locked", "busy", "disk i/o", "unable to open")


def translate(exc: sqlite3.Error, operation: str) -> LaminaError:
    """A LaminaError for a database failure; transient ones are retryable."""
    text = str(exc).lower()
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
        for name, (nargs, fn) in self._functions.items():
            conn.create_function(name, nargs, fn, deterministic=True)
        with self._guard:
            self._all.append(conn)
        self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: writers queue on the file lock, never half-commit."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several statements see one consistent state."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def migrate(self, target: int | None = None) -> int:
        """Apply pending migrations in order (up to ``target``, tests pin older schemas);
        returns the schema version."""
        migrations = sorted(
            (
                p
                for p in resources.files("lamina.store.migrations.sqlite").iterdir()
                if p.name.endswith(".sql")
            ),
            key=lambda p: p.name,
        )
        with self.write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            version = max(done, default=0)
            for migration in migrations:
                number = int(migration.name.split("_", 1)[0])
                if number in done or (target is not None and number > target):
                    continue
                log.info("applying migration %s to %s", migration.name, self.path)
                for statement in _statements(migration.read_text(encoding="utf-8")):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, datetime('now'))",
                    (number, migration.name),
                )
                version = max(version, number)
        return version

    def close(self) -> None:
        with self._guard:
            self._closed = True
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:  # pragma: no cover - closing is best effort
                    log.warning("closing a connection to %s failed", self.path)
            self._all.clear()
        self._local = threading.local()


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
