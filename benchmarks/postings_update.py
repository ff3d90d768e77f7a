"""One UPDATE statement over many memories on PostgreSQL: the postings trigger's cost.
Prints JSON.

The keyword postings (memory_terms, memory_scope_stats) follow every UPDATE of memories
through a statement trigger over the transition tables. Before migration 0012 its plan was
cached at a connection's first call, so after a one-row UPDATE a large one joined the
transition tables in quadratic time. This fills ``--rows`` memories (one tenant, 100
users), runs a one-row UPDATE on a connection, then on the same connection one UPDATE of
every row that changes their terms, and one that changes no indexed column; rows per
second of each (each bounded by ``--timeout`` seconds: a statement cut off reports null).

    .venv/bin/python -m benchmarks.postings_update [--rows 20000] [--timeout 900]

PostgreSQL: LAMINA_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/
lamina_bench); its public schema is emptied first.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import psycopg
from tests.pg import reset_database

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/lamina_bench"


def timed(conn: psycopg.Connection[Any], sql: str, timeout: float) -> float | None:
    """Rows per second of one statement, or None when it ran past ``timeout``."""
    conn.execute(f"SET statement_timeout = {int(timeout * 1000)}")
    start = time.perf_counter()
    try:
        with conn.transaction():
            done = conn.execute(sql).rowcount
    except psycopg.errors.QueryCanceled:
        return None
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    url = os.environ.get("LAMINA_BENCH_POSTGRES_URL", DEFAULT_URL)
    reset_database(url)
    from lamina import Lamina

    with Lamina(database_url=url, data_dir=tempfile.mkdtemp(prefix="lamina-pg-")) as ms:
        version = ms.health()["store"]["schema_version"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, content, "
            "metadata, created_at, updated_at, event_at, lexicon, term_count) "
            "SELECT 'default', 'm-' || i, 'user', 'user-' || i %% 100, "
            "jsonb_build_object('user_id', 'user-' || i %% 100), 'memory number ' || i, "
            "'{}', now(), now(), now(), 'memori:1 number:1 n' || i || ':1', 3 "
            "FROM generate_series(1, %s) i",
            (args.rows,),
        )
        conn.execute("ANALYZE memories")
        conn.execute("UPDATE memories SET metadata = metadata WHERE id = 'm-1'")
        terms = timed(
            conn,
            "UPDATE memories SET lexicon = lexicon || ' extra:1', term_count = term_count + 1",
            args.timeout,
        )
        untouched = timed(
            conn, "UPDATE memories SET metadata = metadata || '{\"seen\": 1}'", args.timeout
        )
        postings = conn.execute("SELECT count(*) FROM memory_terms").fetchone()
    print(
        json.dumps(
            {
                "benchmark": "postings_update",
                "schema_version": version,
                "rows": args.rows,
                "terms_changed_rows_per_s": None if terms is None else round(terms),
                "no_terms_changed_rows_per_s": None if untouched is None else round(untouched),
                "postings": postings[0] if postings else None,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
