"""``lamina info`` (where the data is, what is configured) and ``lamina health``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from lamina.cli._common import State, emit, json_option
from lamina.cli.output import print_fields

__all__ = ["health", "info"]


@click.command("info")
@json_option
@click.pass_obj
def info(state: State, as_json: bool) -> None:
    """Where lamina keeps its data and what it is configured with (opens nothing)."""
    import platform
    from importlib.metadata import version

    from lamina.extras import EXTRAS, installed

    settings = state.settings()
    sources = settings.sources
    extras = {extra: installed(extra) for extra in EXTRAS}
    report: dict[str, Any] = {
        "version": version("lamina"),
        "python": platform.python_version(),
        "data_dir": str(settings.data_dir),
        "data_dir_source": sources.get("data_dir", "settings"),
        "config_file": sources.get("config_file") or None,
        "config_file_source": sources.get("config_file_source", "settings"),
        "store": settings.store_kind(),
        "database": settings.database_location(),
        "knowledge_path": str(settings.knowledge_path()),
        "tenant_id": settings.tenant_id,
        "embedding": {
            "provider": settings.embedding.provider,
            "model": settings.embedding.model or "all-MiniLM-L6-v2",
        },
        "extras": extras,
    }

    def human() -> None:
        config = (
            f"{report['config_file']}  (from {report['config_file_source']})"
            if report["config_file"]
            else "none"
        )
        print_fields(
            [
                ("lamina", f"{report['version']} (Python {report['python']})"),
                ("data directory", f"{report['data_dir']}  (from {report['data_dir_source']})"),
                ("config file", config),
                ("database", f"{report['store']}  {report['database']}"),
                ("knowledge", report["knowledge_path"]),
                ("tenant", report["tenant_id"]),
                ("embedding", f"{settings.embedding.provider} {report['embedding']['model']}"),
                (
                    "extras",
                    "  ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in extras.items()),
                ),
            ]
        )

    emit(as_json, report, human)


@click.command("health")
@json_option
@click.pass_obj
def health(state: State, as_json: bool) -> None:
    """Check the store and show its capabilities."""
    report = state.ms().health()
    emit(as_json, report, lambda: click.echo(json.dumps(report, indent=2)))
    embedding = report.get("embedding", {})
    if embedding.get("reembed_needed") and not as_json:
        click.echo(
            f"note: the store's vectors are of {embedding['store_model']}, the embedder is "
            f"{embedding['embedder_model']}: run `lamina memory reembed` (semantic search is "
            "off until then)",
            err=True,
        )
    if not report["healthy"]:
        sys.exit(1)
