"""The embedded backend: one SQLite file (WAL) and in-process vector and BM25 indexes."""

from lamina.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
