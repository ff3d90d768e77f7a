"""Every door reads and writes through the services: nothing under src/lamina/server reaches
the runtime's store (``ms.store``, ``getattr(ms, "store")``), where the tenant checks,
metrics and retries of the services would be skipped."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lamina.server

SERVER = Path(lamina.server.__file__).parent


def store_reaches(source: str) -> list[int]:
    """The lines of ``source`` that reach an attribute named ``store``."""

    def reaches(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr == "store"
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "store"
        )

    return sorted(node.lineno for node in ast.walk(ast.parse(source)) if reaches(node))


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("status = await ms.store.health_check()", [1]),
        ("x = 1\nrows = ui.ms.store.threads.list_tasks('t')", [2]),
        ("version = getattr(ms.aio, 'store', None)", [1]),
        ("from lamina.server.a2a.store import StoreTaskStore", []),
        ("'''ms.store in a docstring'''\nstore = ms.memory", []),
    ],
)
def test_the_check_finds_a_reach_into_the_store(source: str, lines: list[int]) -> None:
    assert store_reaches(source) == lines


def test_no_module_under_server_reaches_the_store() -> None:
    modules = sorted(SERVER.rglob("*.py"))
    assert len(modules) > 40  # the whole server package was read
    found = {
        f"{path.relative_to(SERVER)}:{line}"
        for path in modules
        for line in store_reaches(path.read_text(encoding="utf-8"))
    }
    assert found == set(), "server/ reaches the store; go through a service instead"
