"""``lamina db ...``: schema migrations and moving data between stores."""

from __future__ import annotations

import click

from lamina.cli._common import State, emit, json_option
from lamina.cli.output import progress

__all__ = ["db"]


@click.group("db")
def db() -> None:
    """Schema migrations and moving data between stores."""


@db.command("upgrade")
@json_option
@click.pass_obj
def db_upgrade(state: State, as_json: bool) -> None:
    """Apply pending schema migrations to the configured database (also done on start)."""
    with progress("applying migrations", as_json=as_json):
        ms = state.ms()  # opening the store applies the pending migrations
    store = ms.settings.store_kind()
    version = ms.aio.schema_version
    report = {"store": store, "schema_version": version}
    emit(as_json, report, lambda: click.echo(f"{store} store at schema version {version}"))


@db.command("copy")
@click.option("--from", "source", required=True, help="sqlite:///path/to/lamina.db")
@click.option("--to", "target", required=True, help="postgresql://user@host:port/database")
@json_option
def db_copy(source: str, target: str, as_json: bool) -> None:
    """Copy an embedded store into PostgreSQL (embeddings and history included), verified."""
    import asyncio

    from lamina.config import sqlite_url_path
    from lamina.extras import require

    require("postgres")
    from lamina.store.copy import copy_sqlite_to_postgres

    with progress("copying rows", as_json=as_json) as on_progress:
        report = asyncio.run(
            copy_sqlite_to_postgres(sqlite_url_path(source), target, on_progress=on_progress)
        )

    def human() -> None:
        for tenant, counts in report["tenants"].items():
            numbers = ", ".join(f"{table} {n}" for table, n in counts.items())
            click.echo(f"tenant {tenant}: {numbers}")
        click.echo(f"copied {len(report['tenants'])} tenant(s); counts verified")

    emit(as_json, report, human)
