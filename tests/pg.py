"""The PostgreSQL the tests use: MEMSTRATA_TEST_POSTGRES_URL (scripts/test sets it from
scripts/pg-setup). Without it PostgreSQL tests are skipped, unless MEMSTRATA_REQUIRE_POSTGRES
is set (as in CI), when they fail."""

from __future__ import annotations

import os

import psycopg
import pytest

PG_URL = os.environ.get("MEMSTRATA_TEST_POSTGRES_URL", "")
REQUIRED = bool(os.environ.get("MEMSTRATA_REQUIRE_POSTGRES"))


def require_postgres() -> str:
    if not PG_URL:
        if REQUIRED:
            pytest.fail("MEMSTRATA_TEST_POSTGRES_URL is not set (run scripts/pg-setup)")
        pytest.skip("no PostgreSQL configured: set MEMSTRATA_TEST_POSTGRES_URL")
    return PG_URL


def reset_database(url: str) -> None:
    """An empty public schema with pgvector: every test starts from nothing."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
