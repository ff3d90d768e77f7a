"""lamina db …: the progress of a copy (tests/store/test_postgres.py checks what it copies)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lamina import Lamina
from tests.cli.runner import run
from tests.conftest import fast_settings
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
    # Every row of both tenants: a memory, its history and its cached embedding each.
    assert "copying rows" in err and "6/6" in err

    reset_database(url)
    code, out, err = run(capsys, data_dir, "db", "copy", "--from", source, "--to", url, "--json")
    assert code == 0 and err == "" and set(json.loads(out)["tenants"]) == {"default", "T2"}
