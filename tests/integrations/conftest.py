"""A Lamina on each store (the SQLite file, a real PostgreSQL with pgvector): the adapters'
conformance suites run on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina import Lamina
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres


@pytest.fixture(params=["sqlite", "postgres"])
def on_store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Lamina]:
    overrides: dict[str, object] = {}
    if request.param == "postgres":
        url = require_postgres()
        empty_database(url)
        overrides["database_url"] = url
    with Lamina(fast_settings(data_dir, **overrides)) as ms:
        yield ms
