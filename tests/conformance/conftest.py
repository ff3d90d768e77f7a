"""Store factories for the conformance suite: every store must pass the same tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from lamina.backend import Backend
from lamina.embeddings.local import LocalEmbedder
from lamina.store.postgres import PostgresStore
from lamina.store.sqlite import SQLiteStore
from tests.pg import empty_database, require_postgres

T = TypeVar("T")


@dataclass
class Harness:
    store: Backend
    run: Callable[[Coroutine[Any, Any, Any]], Any]
    reopen: Callable[[], Backend]
    embedder: LocalEmbedder


STORES = ["sqlite", "postgres"]


@pytest.fixture(params=STORES)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    embedder = LocalEmbedder()
    url = ""
    if request.param == "postgres":
        url = require_postgres()
        empty_database(url)
    opened: list[Backend] = []
    with asyncio.Runner() as runner:

        def make() -> Backend:
            store: Backend
            if request.param == "sqlite":
                store = SQLiteStore(tmp_path / "conformance.db", embedder)
            else:
                store = PostgresStore(url, embedder, pool_max=4)
            runner.run(store.initialize())
            opened.append(store)
            return store

        yield Harness(make(), runner.run, make, embedder)
        for store in opened:
            runner.run(store.shutdown())
