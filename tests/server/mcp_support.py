"""Running `lamina mcp` as docs/mcp.md says, over stdio with the official mcp client: the
page's marked blocks (client configurations, examples), the server process and its calls."""

from __future__ import annotations

import asyncio
import json
import os
import re
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mcp.md"
LAMINA = ROOT / ".venv" / "bin" / "lamina"
IDENTIFIERS = ("agent_id", "user_id", "session_id", "project_id", "team_id", "org_id", "company_id")
CLIENTS = ("claude-desktop", "cursor", "vscode")
SESSION_TIMEOUT = 120.0  # seconds for a whole client session, start to shutdown
REQUEST_TIMEOUT = 60.0  # seconds for one request (the first loads the embedding model)

_SNIPPET = re.compile(r"<!-- mcp-config: ([\w-]+) -->\s*```json\n(.*?)\n```", re.S)
#: "27 tools", "the same 27 tools", "21 memory, knowledge and context tools"
TOOL_COUNT = re.compile(r"\b(\d+) (?:[\w`-]+,? ){0,6}?tools\b")
_EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\s*```(\w+)\n(.*?)\n *```", re.S)


def snippets() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, body in _SNIPPET.findall(DOC.read_text(encoding="utf-8")):
        assert name not in found, f"two snippets marked {name}"
        found[name] = json.loads(body)
    return found


def examples() -> dict[str, tuple[str, str]]:
    """The page's examples marked ``<!-- example: name -->``: name → (language, text)."""
    found: dict[str, tuple[str, str]] = {}
    for name, language, body in _EXAMPLE.findall(DOC.read_text(encoding="utf-8")):
        assert name not in found, f"two examples marked {name}"
        found[name] = (language, textwrap.dedent(body))
    return found


def documented_tool_count() -> int:
    """The one tool count docs/mcp.md states."""
    counts = TOOL_COUNT.findall(DOC.read_text(encoding="utf-8"))
    assert len(counts) == 1, f"docs/mcp.md states {len(counts)} tool counts: {counts}"
    return int(counts[0])


def server_entry(client: str, config: dict[str, Any]) -> dict[str, Any]:
    """The ``lamina`` entry, after checking the shape ``client`` expects."""
    key = "servers" if client == "vscode" else "mcpServers"
    assert list(config) == [key], f"{client}: top-level key must be {key!r}"
    entry: dict[str, Any] = config[key]["lamina"]
    allowed = (
        {"type", "command", "args", "env"} if client == "vscode" else {"command", "args", "env"}
    )
    assert set(entry) <= allowed, f"{client}: unexpected fields {set(entry) - allowed}"
    if client == "vscode":
        assert entry["type"] == "stdio"
    assert isinstance(entry["command"], str) and entry["command"]
    assert isinstance(entry["args"], list) and all(isinstance(a, str) for a in entry["args"])
    env = entry.get("env", {})
    assert isinstance(env, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    return entry


def command_of(entry: dict[str, Any]) -> str:
    """The snippet's command; the bare name ``lamina`` is this checkout's console script."""
    if entry["command"] != "lamina":
        return str(entry["command"])
    assert LAMINA.is_file(), f"{LAMINA} is missing: run scripts/bootstrap"
    return str(LAMINA)


def expected_defaults(entry: dict[str, Any]) -> dict[str, str]:
    """The default identifiers the snippet configures: LAMINA_MCP__* then the options."""
    env = entry.get("env", {})
    found = {
        n: env[f"LAMINA_MCP__{n.upper()}"] for n in IDENTIFIERS if f"LAMINA_MCP__{n.upper()}" in env
    }
    args = entry["args"]
    for flag, value in pairwise(args):
        name = flag.removeprefix("--").replace("-", "_")
        if flag.startswith("--") and name in IDENTIFIERS:
            found[name] = value
    return found


@asynccontextmanager
async def mcp_session(
    command: str, args: list[str], env: dict[str, str], data_dir: Path, errlog: Path
) -> AsyncIterator[Any]:
    """An initialised client session with ``command args`` (``env`` over this process's
    environment; LAMINA_DATA_DIR is ``data_dir``); its stderr goes to ``errlog``."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=command,
        args=args,
        env={**os.environ, **env, "LAMINA_DATA_DIR": str(data_dir)},
    )
    with errlog.open("w", encoding="utf-8") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, read_timeout_seconds=REQUEST_TIMEOUT) as session,
        ):
            yield session


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(SESSION_TIMEOUT):
            await scenario()

    asyncio.run(bounded())


async def call(session: Any, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    result = await session.call_tool(tool, arguments)
    return bool(result.is_error), json.loads(result.content[0].text)


async def ok(session: Any, tool: str, arguments: dict[str, Any]) -> Any:
    """The result of a call that must succeed."""
    error, result = await call(session, tool, arguments)
    assert not error, (tool, arguments, result)
    return result
