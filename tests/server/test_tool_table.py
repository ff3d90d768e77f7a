"""The tools are declared once (lamina.server.tools.TOOLS): each a module-level handler that
can be found by its name, every door offers the table in its order, and ServerTool.run is
the one way a tool runs: arguments checked, the door's admission asked, then the handler; a
refused admission or a bad argument stores nothing, on SQLite and PostgreSQL."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lamina import ErrorCode, Lamina, LaminaError
from lamina.server.app import LaminaServer
from lamina.server.mcp_adapter import MCPAdapter
from lamina.server.tools import TOOLS, MissingArguments, ServerTool
from lamina.server.tools.args import Args
from lamina.server.tools.memory_args import MemoryAdd
from tests.conftest import fast_settings
from tests.server.args_support import STORES, store_overrides

SKILL_MODULES = {
    "memory": ("lamina.server.tools.memory", "lamina.server.tools.hierarchy"),
    "knowledge": ("lamina.server.tools.knowledge",),
    "governance": ("lamina.server.tools.governance",),
    "context": ("lamina.server.tools.context",),
}


def test_each_tool_is_declared_once_and_its_handler_found_by_name() -> None:
    names = [tool.name for tool in TOOLS]
    assert len(names) == len(set(names)) == 28
    for tool in TOOLS:
        module = importlib.import_module(tool.handler.__module__)
        assert module.__name__ in SKILL_MODULES[tool.skill], tool.name
        assert getattr(module, tool.name) is tool.handler
        assert inspect.iscoroutinefunction(tool.handler)
        assert issubclass(tool.args, Args) and tool.args.model_config["strict"] is True
        assert tool.description and tool.description == tool.description.strip()
    # Each skill's tools stand together, in the order the card and tools/list give them.
    skills = [tool.skill for tool in TOOLS]
    assert skills == sorted(skills, key=["memory", "knowledge", "governance", "context"].index)


def test_every_door_offers_the_table_in_its_order(ms: Lamina) -> None:
    server = LaminaServer(ms.aio)
    mcp = MCPAdapter(ms.aio, server.metrics)
    declared = [(t.name, t.skill, t.description, t.args, t.read_only) for t in TOOLS]
    for registry in (server.registry, mcp.registry):
        offered = registry.all()
        assert [(t.name, t.skill, t.description, t.model, t.read_only) for t in offered] == (
            declared
        )
        assert {registry.skill_of(t.name) for t in offered} == set(SKILL_MODULES)
    listed = [t.name for t in [*mcp.get_memory_tools(), *mcp.get_knowledge_tools()]]
    assert listed == [t.name for t in TOOLS]


def _memory_add(ms: Lamina) -> ServerTool:
    return next(t for t in TOOLS if t.name == "memory_add").bind(ms.aio)


@STORES
def test_run_checks_then_admits_then_handles(store: str, tmp_path: Path) -> None:
    with Lamina(fast_settings(tmp_path / "data", **store_overrides(store))) as ms:
        tool = _memory_add(ms)
        admitted: list[BaseModel] = []
        arguments = {"content": "Alice likes tea", "layer": "user", "user_id": "alice"}
        done = ms._run(tool.run(arguments, "a", admit=admitted.append))
        assert [type(a) for a in admitted] == [MemoryAdd]
        assert admitted[0].model_dump()["content"] == "Alice likes tea"
        assert done["content"] == "Alice likes tea" and done["tenant_id"] == "a"
        assert [m.id for m in ms.memory.list(user_id="alice", tenant_id="a").items] == [done["id"]]


@STORES
def test_a_refused_call_or_a_bad_argument_stores_nothing(store: str, tmp_path: Path) -> None:
    with Lamina(fast_settings(tmp_path / "data", **store_overrides(store))) as ms:
        tool = _memory_add(ms)
        arguments = {"content": "Alice likes tea", "layer": "user", "user_id": "alice"}

        def refuse(_: BaseModel) -> None:
            raise LaminaError(ErrorCode.THREAD_STATE_TOO_LARGE, "no room for the record")

        with pytest.raises(LaminaError) as refused:
            ms._run(tool.run(arguments, "a", admit=refuse))
        assert refused.value.code is ErrorCode.THREAD_STATE_TOO_LARGE

        asked: list[Any] = []
        with pytest.raises(MissingArguments) as missing:
            ms._run(tool.run({"user_id": "alice"}, "a", admit=asked.append))
        assert missing.value.code is ErrorCode.INVALID_ARGUMENT
        assert missing.value.to_dict()["details"] == {
            "tool": "memory_add",
            "missing": ["content", "layer"],
        }
        with pytest.raises(LaminaError) as wrong:
            ms._run(tool.run({**arguments, "layer": 7}, "a", admit=asked.append))
        assert not isinstance(wrong.value, MissingArguments)
        assert wrong.value.details == {"tool": "memory_add", "field": "layer", "got": "an integer"}
        assert asked == []
        assert ms.memory.list(user_id="alice", tenant_id="a").total_count == 0
