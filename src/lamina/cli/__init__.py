"""The lamina command line. Every command mirrors a library call and can print JSON.

The root group lives here and names the command groups, one module each, which it imports
only when one runs (``lazy.LazyGroup``): ``lamina --version`` and ``--help`` stay instant. The
command modules share only ``_common`` (state, options, JSON) and ``output`` (tables, progress
bars)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from lamina import __version__
from lamina.cli._common import State, fail, path_option
from lamina.cli.lazy import LazyCommand, LazyGroup
from lamina.errors import ErrorCode, LaminaError

__all__ = ["COMMANDS", "cli", "main"]


#: Every command of the root group: where it lives and its short help (its docstring's first
#: sentence; tests/test_startup.py checks both against the command).
COMMANDS: dict[str, LazyCommand] = {
    name: LazyCommand(path, short_help)
    for name, path, short_help in (
        (
            "memory",
            "lamina.cli.memory:memory",
            "Add, search, get, update, delete, list memories, read their history; delete, "
            "export and import them in bulk.",
        ),
        (
            "hierarchy",
            "lamina.cli.hierarchy:hierarchy",
            "Register which team a project, which org a team, which company an org belongs to.",
        ),
        (
            "context",
            "lamina.cli.context:context",
            "User knowledge, agent learnings, skills, references; retrieve and assemble prompts.",
        ),
        (
            "session",
            "lamina.cli.sessions:session",
            "Session messages, observations and reflections (observational memory).",
        ),
        (
            "knowledge",
            "lamina.cli.knowledge:knowledge",
            "The git-backed knowledge repository: ADRs, policies, patterns, specs.",
        ),
        (
            "governance",
            "lamina.cli.governance:governance",
            "Policies in force at a layer, validation and drift.",
        ),
        ("db", "lamina.cli.db:db", "Schema migrations and moving data between stores."),
        (
            "info",
            "lamina.cli.system:info",
            "Where lamina keeps its data and what it is configured with (opens nothing).",
        ),
        ("health", "lamina.cli.system:health", "Check the store and show its capabilities."),
        (
            "demo",
            "lamina.cli.demo:demo",
            "Store a few memories and context items in the 'demo' tenant, search them in "
            "every mode and print the system prompt assembled for a question.",
        ),
        (
            "serve",
            "lamina.cli.server:serve",
            "Run the A2A server: the memory, knowledge and governance skills over JSON-RPC, "
            "HTTP+JSON and SSE, with the Agent Card at /.well-known/agent-card.json, /health "
            "and /metrics.",
        ),
        (
            "mcp",
            "lamina.cli.server:mcp",
            "Run the MCP server: the same memory, knowledge and governance tools as the A2A "
            "server, over stdio or streamable HTTP (API keys and loopback rule as for serve).",
        ),
        (
            "keys",
            "lamina.cli.server:keys",
            "API keys of the servers (only their hashes go into the configuration).",
        ),
    )
}


@click.group(cls=LazyGroup, lazy=COMMANDS)
@path_option(
    "--data-dir",
    "data_dir",
    directory=True,
    help="Data directory (default: LAMINA_DATA_DIR, else data_dir in the config file, else "
    "the user data directory; `lamina info` shows which).",
)
@click.option(
    "--database-url",
    default=None,
    help="sqlite:///path/to/file.db or postgresql://user@host:port/db (default: the SQLite "
    "file in the data directory).",
)
@path_option(
    "--config",
    "config_file",
    directory=False,
    help="A TOML settings file (default: LAMINA_CONFIG, else lamina.toml in the user config "
    "directory when it exists).",
)
@click.option("--tenant", "tenant_id", default=None, help="Tenant (default: 'default').")
@click.version_option(__version__, package_name="lamina")  # not importlib.metadata: instant
@click.pass_context
def cli(
    ctx: click.Context,
    data_dir: Path | None,
    database_url: str | None,
    config_file: Path | None,
    tenant_id: str | None,
) -> None:
    """lamina: layered long-term memory for AI agents."""
    state = State(
        {
            "data_dir": data_dir,
            "database_url": database_url,
            "config_file": config_file,
            "tenant_id": tenant_id,
        }
    )
    ctx.obj = state
    ctx.call_on_close(state.close)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: errors print their code and message, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args
    logging.basicConfig(
        level=os.environ.get("LAMINA_LOG_LEVEL", "WARNING").upper(),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        cli.main(args=args, prog_name="lamina", standalone_mode=False)
    except LaminaError as exc:
        fail(exc, as_json)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # the last line of defence: no traceback for users
        if os.environ.get("LAMINA_DEBUG"):
            raise
        logging.getLogger("lamina").error("unexpected failure", exc_info=exc)
        fail(LaminaError(ErrorCode.INTERNAL_ERROR, f"unexpected failure: {exc}"), as_json)
