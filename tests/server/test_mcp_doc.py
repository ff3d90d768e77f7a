"""The examples of docs/mcp.md run as written: their commands and files are read from the
page (blocks marked ``<!-- example: name -->``), the servers they start are driven by the
official mcp client. And the tool count the pages state is what tools/list returns."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.server.mcp_support import (
    DOC,
    LAMINA,
    ROOT,
    TOOL_COUNT,
    documented_tool_count,
    examples,
    expected_defaults,
    mcp_session,
    ok,
    run,
    snippets,
)

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

#: The pages stating how many tools `lamina mcp` serves.
COUNTED = (DOC, ROOT / "docs" / "server.md")
_INSTALLERS = (("pipx", "install"), ("pip", "install"), ("uv", "tool"))


def commands(name: str) -> list[list[str]]:
    """The shell example ``name``'s commands (comments dropped), ``lamina`` being this
    checkout's console script."""
    language, text = examples()[name]
    assert language == "sh", f"example {name} is not a shell example"
    found = [shlex.split(line, comments=True) for line in text.splitlines()]
    lines = [c for c in found if c]
    return [[str(LAMINA), *c[1:]] if c[0] == "lamina" else c for c in lines]


def server_args(command: list[str]) -> list[str]:
    assert command[:2] == [str(LAMINA), "mcp"], command
    return command[1:]


def test_every_block_of_the_page_is_run() -> None:
    text = DOC.read_text(encoding="utf-8")
    opened = re.findall(r"^ *```\w+$", text, re.M)
    assert len(opened) == len(examples()) + len(snippets()), "a block is neither marked nor run"
    assert set(examples()) == {"install", "defaults", "config-file", "by-hand"}


def test_the_pages_state_the_tool_count_tools_list_returns(tmp_path: Path) -> None:
    for page in COUNTED:
        counts = [int(n) for n in TOOL_COUNT.findall(page.read_text(encoding="utf-8"))]
        assert counts == [documented_tool_count()], page

    async def scenario() -> None:
        async with mcp_session(str(LAMINA), ["mcp"], {}, tmp_path / "d", tmp_path / "e") as s:
            await s.initialize()
            tools = (await s.list_tools()).tools
            assert len({t.name for t in tools}) == len(tools) == documented_tool_count()

    run(scenario)


def test_install(tmp_path: Path) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    for command in commands("install"):
        if tuple(command[:2]) in _INSTALLERS:
            # Installing needs the package index: check what it installs instead.
            spec = command[-1]
            assert spec.startswith("lamina[") and spec[len("lamina[") : -1] in extras, spec
            continue
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert "--user-id" in done.stdout and "--transport" in done.stdout


async def _resolved(session: Any) -> dict[str, Any]:
    """The identifiers a call without any reaches (team, org and company, resolved from
    the hierarchy, left out)."""
    found = (await ok(session, "hierarchy_resolve", {}))["identifiers"]
    return {k: v for k, v in found.items() if k not in ("team_id", "org_id", "company_id")}


def test_defaults(tmp_path: Path) -> None:
    [command] = commands("defaults")
    args = server_args(command)
    defaults = expected_defaults({"args": args})
    assert defaults == {"user_id": "alice", "project_id": "atlas"}

    async def scenario() -> None:
        async with mcp_session(command[0], args, {}, tmp_path / "d", tmp_path / "e") as s:
            await s.initialize()
            assert await _resolved(s) == defaults
            mine = await ok(s, "memory_add", {"content": "tabs", "layer": "user"})
            assert mine["identifiers"] == {"user_id": defaults["user_id"]}
            ours = await ok(s, "memory_add", {"content": "spaces", "layer": "project"})
            assert ours["identifiers"] == {"project_id": defaults["project_id"]}
            listed = await ok(s, "memory_list", {})
            assert {m["content"] for m in listed["items"]} == {"tabs", "spaces"}

    run(scenario)


def test_config_file(tmp_path: Path) -> None:
    language, text = examples()["config-file"]
    assert language == "toml"
    config = tmp_path / "lamina.toml"
    config.write_text(textwrap.dedent(text), encoding="utf-8")
    values = tomllib.loads(config.read_text(encoding="utf-8"))["mcp"]
    env = {"LAMINA_CONFIG": str(config)}

    async def scenario() -> None:
        async with mcp_session(str(LAMINA), ["mcp"], env, tmp_path / "d", tmp_path / "e") as s:
            await s.initialize()
            assert await _resolved(s) == values
        # The environment wins over the file, the command-line options over both.
        over = {**env, "LAMINA_MCP__PROJECT_ID": "apollo"}
        args = ["mcp", "--user-id", "bob"]
        async with mcp_session(str(LAMINA), args, over, tmp_path / "d", tmp_path / "e") as s:
            await s.initialize()
            assert await _resolved(s) == {"user_id": "bob", "project_id": "apollo"}

    run(scenario)


def test_by_hand(tmp_path: Path) -> None:
    server, search = commands("by-hand")
    data = tmp_path / "d"

    async def scenario() -> None:
        async with mcp_session(server[0], server_args(server), {}, data, tmp_path / "e") as s:
            await s.initialize()
            await ok(s, "memory_add", {"content": "My editor is Helix", "layer": "user"})

    run(scenario)
    done = subprocess.run(
        search,
        env={**os.environ, "LAMINA_DATA_DIR": str(data)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "My editor is Helix" in done.stdout
