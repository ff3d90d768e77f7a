"""Every door reads and writes through the services: nothing under src/lamina/server (nor
src/lamina/cli) reaches the runtime's store (``ms.store``, ``getattr(ms, "store")``), where
the tenant checks, metrics and retries of the services would be skipped. (``lamina db copy``
imports ``lamina.store.copy``: a tool over two stores, not a reach into the runtime's.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lamina.cli
import lamina.server

SERVER = Path(lamina.server.__file__).parent
CLI = Path(lamina.cli.__file__).parent


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


@pytest.mark.parametrize(("package", "at_least"), [(SERVER, 40), (CLI, 10)])
def test_no_door_reaches_the_store(package: Path, at_least: int) -> None:
    modules = sorted(package.rglob("*.py"))
    assert len(modules) > at_least  # the whole package was read
    found = {
        f"{path.relative_to(package.parent)}:{line}"
        for path in modules
        for line in store_reaches(path.read_text(encoding="utf-8"))
    }
    assert found == set(), "a door reaches the store: go through the runtime or a service"
