"""``lamina serve`` (the A2A server), ``lamina mcp`` (the MCP server) and
``lamina keys`` (API keys for them)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from lamina.cli._common import IDENTIFIERS, State, json_option, options, path_option
from lamina.config import Settings
from lamina.extras import installed, require

__all__ = ["keys", "mcp", "serve"]


def _with_bind(settings: Settings, host: str | None, port: int | None) -> Settings:
    update: dict[str, Any] = {}
    if host is not None:
        update["host"] = host
    if port is not None:
        update["port"] = port
    if update:
        return settings.model_copy(update={"server": settings.server.model_copy(update=update)})
    return settings


_bind = options(
    click.option("--host", default=None, help="Bind address (default: server.host, 127.0.0.1)."),
    click.option("--port", type=int, default=None, help="Port (default: server.port, 8750)."),
    path_option(
        "--data-dir",
        "serve_data_dir",
        directory=True,
        help="Data directory (as the global --data-dir).",
    ),
    path_option(
        "--config",
        "serve_config",
        directory=False,
        help="A TOML settings file (as the global --config).",
    ),
)


def _default_identifiers(fn: Any) -> Any:
    for name in reversed(IDENTIFIERS):
        flag = "--" + name.replace("_", "-")
        env = "LAMINA_MCP__" + name.upper()
        fn = click.option(
            flag,
            name,
            default=None,
            help=f"Default {name} of tool calls that omit it (also mcp.{name}, {env}).",
        )(fn)
    return fn


def _with_identifiers(settings: Settings, ids: dict[str, str | None]) -> Settings:
    given = {k: v for k, v in ids.items() if v is not None}
    if given:
        return settings.model_copy(update={"mcp": settings.mcp.model_copy(update=given)})
    return settings


@click.command("serve")
@_bind
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Server processes on the one address (default: server.workers, 1). They share the "
    "store; rate limits are shared only through server.redis_url.",
)
@click.pass_obj
def serve(
    state: State,
    host: str | None,
    port: int | None,
    serve_data_dir: Path | None,
    serve_config: Path | None,
    log_level: str,
    workers: int | None,
) -> None:
    """Run the A2A server: the memory, knowledge and governance skills over JSON-RPC,
    HTTP+JSON and SSE, with the Agent Card at /.well-known/agent-card.json, /health and
    /metrics. Bind address, port, API keys, database and rate limits also come from
    LAMINA_SERVER__* variables or the [server] table of the config file."""
    require("server")
    settings = _with_bind(
        state.settings(data_dir=serve_data_dir, config_file=serve_config), host, port
    )
    if workers is not None:
        settings = settings.model_copy(
            update={"server": settings.server.model_copy(update={"workers": workers})}
        )
    from lamina.server.run import run_a2a, run_loop
    from lamina.server.workers import serve_workers

    if settings.server.workers > 1:
        serve_workers(settings, log_level)
    else:
        run_loop(run_a2a(settings, log_level))


@click.command("mcp")
@_bind
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a local client; http: streamable HTTP at /mcp.",
)
@_default_identifiers
@click.pass_obj
def mcp(
    state: State,
    /,
    host: str | None,
    port: int | None,
    serve_data_dir: Path | None,
    serve_config: Path | None,
    transport: str,
    **ids: str | None,
) -> None:
    """Run the MCP server: the same memory, knowledge and governance tools as the A2A
    server, over stdio or streamable HTTP (API keys and loopback rule as for serve).

    --user-id, --project-id … are filled into every memory tool call that omits them, so
    the model need not invent them; an identifier the model passes wins, null means none.
    memory_delete_all takes only --user-id: {} forgets that user's memories in every layer
    the user owns (docs/mcp.md)."""
    if transport == "http" or not installed("mcp"):
        require("mcp")  # over stdio it is imported while the client's initialize is answered
    if transport == "http":
        require("server", "The MCP server over streamable HTTP")
    settings = _with_bind(
        state.settings(data_dir=serve_data_dir, config_file=serve_config), host, port
    )
    settings = _with_identifiers(settings, ids)
    from lamina.server.mcp_stdio import run_mcp

    asyncio.run(run_mcp(settings, transport))


@click.group("keys")
def keys() -> None:
    """API keys of the servers (only their hashes go into the configuration)."""


@keys.command("new")
@click.option("--tenant", "key_tenant", required=True, help="The tenant the key acts for.")
@click.option("--tier", default="default", show_default=True, help="Its rate-limit tier.")
@click.option("--name", default="", help="A label for people and logs.")
@json_option
def keys_new(key_tenant: str, tier: str, name: str, as_json: bool) -> None:
    """Make a key: prints it once, and the entry to add to server.api_keys."""
    from lamina.server.auth import hash_key, new_key

    key = new_key()
    entry = {"key_hash": hash_key(key), "tenant_id": key_tenant, "tier": tier, "name": name}
    if as_json:
        click.echo(json.dumps({"key": key, "entry": entry}, indent=2))
        return
    click.echo(f"key (shown once, give it to the client): {key}")
    click.echo("add to the config file:")
    click.echo("[[server.api_keys]]")
    for field, value in entry.items():
        click.echo(f"{field} = {json.dumps(value)}")
