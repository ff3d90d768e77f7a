"""lamina db …: the progress of a copy (tests/store/test_postgres.py checks what it copies)."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from lamina import Lamina
from tests.cli.runner import run
from tests.conftest import fast_settings, openai_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.pg import require_postgres, reset_database


def test_db_copy_reports_rows_copied_per_tenant(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = require_postgres()
    reset_database(url)
    data_dir = tmp_path / "embedded"
    with Lamina(fast_settings(data_dir)) as ms:
        ms.memory.add("one", layer="user", user_id="u")
        ms.memory.add("two", layer="user", user_id="u", tenant_id="T2")
    source = f"sqlite:///{data_dir / 'lamina.db'}"
    monkeypatch.setenv("LAMINA_PROGRESS", "always")
    code, out, err = run(capsys, data_dir, "db", "copy", "--from", source, "--to", url)
    assert code == 0 and out.endswith("copied 2 tenant(s); counts verified\n")
    # Every row of both tenants: a memory and its history each (the memory holds its
    # vector: the embedding cache has no copy of it, issue 35).
    assert "copying rows" in err and "4/4" in err

    reset_database(url)
    code, out, err = run(capsys, data_dir, "db", "copy", "--from", source, "--to", url, "--json")
    assert code == 0 and err == "" and set(json.loads(out)["tenants"]) == {"default", "T2"}


def test_db_copy_refuses_a_database_of_another_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The destination was opened with another model first (``lamina serve``): nothing is
    copied, the copy is refused as before the stores could change model."""
    url = require_postgres()
    reset_database(url)
    with FakeOpenAI(dims=16) as server:
        settings = openai_settings(tmp_path / "pg", server, database_url=url)
        settings.embedding.model = "fake-embed-2"  # same dimensions, another model
        with Lamina(settings):
            pass
        data_dir = tmp_path / "embedded"
        with Lamina(openai_settings(data_dir, server)) as ms:
            ms.memory.add("copied memory", layer="user", user_id="u")
    source = f"sqlite:///{data_dir / 'lamina.db'}"
    code, out, err = run(capsys, data_dir, "db", "copy", "--from", source, "--to", url, "--json")
    assert code != 0
    error = json.loads(out or err)["error"]
    assert error["code"] == "CONFIGURATION_ERROR" and "fake-embed-2" in error["message"]
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        meta = dict(conn.execute("SELECT key, value FROM store_meta").fetchall())
    assert meta["embedding_model"] == "fake-embed-2"
