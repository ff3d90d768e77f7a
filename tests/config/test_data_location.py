"""One data location for every entry point: argument or flag > LAMINA_DATA_DIR > config file
> platform default, the same for the library, the installed CLI, scripts/run and the servers,
and each can say where it is. sqlite: URLs resolve the documented way or are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina import ErrorCode, Lamina, LaminaError, load_settings
from lamina.config import sqlite_url_path

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def lamina(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=120,
        check=False,
    )


def info(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
    result = lamina(*args, "info", "--json", env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_rule_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["HOME"])
    default = home / ".local/share/lamina"
    config = tmp_path / "conf.toml"
    config.write_text(f'data_dir = "{tmp_path / "from-config"}"\n')

    assert load_settings().data_dir == default
    assert load_settings().sources["data_dir"] == "platform default"
    assert load_settings(config).data_dir == tmp_path / "from-config"
    monkeypatch.setenv("LAMINA_DATA_DIR", str(tmp_path / "from-env"))
    assert load_settings(config).data_dir == tmp_path / "from-env"
    assert load_settings(config).sources["data_dir"] == "LAMINA_DATA_DIR"
    chosen = load_settings(config, data_dir=tmp_path / "from-arg")
    assert chosen.data_dir == tmp_path / "from-arg"
    assert chosen.sources == {
        "data_dir": "argument",
        "config_file": str(config),
        "config_file_source": "argument",
    }

    # The CLI follows the same rule, flag first.
    assert info(env={"LAMINA_CONFIG": str(config)})["data_dir"] == str(tmp_path / "from-env")
    report = info("--data-dir", str(tmp_path / "flag"), env={"LAMINA_CONFIG": str(config)})
    assert report["data_dir"] == str(tmp_path / "flag")
    assert report["data_dir_source"] == "argument"
    assert report["database"] == str(tmp_path / "flag" / "lamina.db")
    assert report["knowledge_path"] == str(tmp_path / "flag" / "knowledge")
    monkeypatch.delenv("LAMINA_DATA_DIR")
    report = info(env={"LAMINA_CONFIG": str(config)})
    assert report["data_dir"] == str(tmp_path / "from-config")
    assert report["data_dir_source"] == f"config file {config}"
    assert info()["data_dir"] == str(default)


def test_the_default_config_file_and_relative_paths(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "lamina").mkdir(parents=True)
    (xdg / "lamina" / "lamina.toml").write_text('data_dir = "data"\ntenant_id = "t1"\n')
    env = {"XDG_CONFIG_HOME": str(xdg)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = info(env=env, cwd=elsewhere)
    # A relative data_dir in a config file is relative to the file, wherever lamina starts.
    assert report["data_dir"] == str(xdg / "lamina" / "data")
    assert report["config_file"] == str(xdg / "lamina" / "lamina.toml")
    assert report["config_file_source"] == "default location"
    assert report["tenant_id"] == "t1"
    # A relative --data-dir is relative to the current directory, printed absolute.
    assert info("--data-dir", "mine", env=env, cwd=elsewhere)["data_dir"] == str(elsewhere / "mine")


def test_scripts_run_uses_the_same_rule(tmp_path: Path) -> None:
    env = {**os.environ, "LAMINA_DATA_DIR": str(tmp_path / "d")}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts/run"), "info", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["data_dir"] == str(tmp_path / "d")


def test_the_library_uses_and_reports_the_same_place(tmp_path: Path) -> None:
    with Lamina(data_dir=tmp_path / "lib") as ms:
        ms.memory.add("Prefers tea", layer="user", user_id="u")
        assert ms.settings.database_location() == str(tmp_path / "lib" / "lamina.db")
    assert (tmp_path / "lib" / "lamina.db").is_file()
    # The CLI on the same directory sees the same memory.
    result = lamina(
        "--data-dir", str(tmp_path / "lib"), "memory", "list", "--user-id", "u", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert [m["content"] for m in json.loads(result.stdout)["items"]] == ["Prefers tea"]


def test_the_server_says_where_its_data_is(tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "srv"), "serve", "--port", "0", "--log-level", "warning"]
    process = subprocess.Popen(
        [sys.executable, "-m", "lamina", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        where = process.stdout.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, errors = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, errors = process.communicate(timeout=10)
    assert banner.startswith("lamina A2A server on http://127.0.0.1:"), (banner, errors)
    assert f"data directory {tmp_path / 'srv'};" in where, (where, errors)
    assert f"database sqlite {tmp_path / 'srv' / 'lamina.db'}" in where


def test_sqlite_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "db").mkdir()
    assert sqlite_url_path("sqlite:///db/x.db") == tmp_path / "db" / "x.db"
    assert sqlite_url_path(f"sqlite:///{tmp_path}/db/x.db") == tmp_path / "db" / "x.db"
    home = Path(os.environ["HOME"])
    home.mkdir(parents=True, exist_ok=True)
    assert sqlite_url_path("sqlite:///~/x.db") == home / "x.db"
    for bad, words in [
        ("sqlite:///missing/x.db", "does not exist"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite:///db/x.db?mode=ro", "URI parameters"),
        ("sqlite:///db", "is a directory"),
        ("sqlite://db/x.db", "not supported"),
        ("mysql://h/db", "not supported"),
    ]:
        with pytest.raises(LaminaError) as caught:
            sqlite_url_path(bad)
        assert caught.value.code is ErrorCode.CONFIGURATION_ERROR
        assert words in caught.value.message, bad
    # The library refuses before creating anything.
    with pytest.raises(LaminaError) as caught:
        Lamina(data_dir=tmp_path / "d", database_url="sqlite:///missing/x.db")
    assert caught.value.code is ErrorCode.CONFIGURATION_ERROR
    assert not (tmp_path / "missing").exists()
    # So does the CLI, with its error code.
    result = lamina("--database-url", "sqlite:///missing/x.db", "memory", "list", "--user-id", "u")
    assert result.returncode == 1
    assert "error: CONFIGURATION_ERROR: database URL 'sqlite:///missing/x.db'" in result.stderr
    # And db copy's --from.
    result = lamina(
        "db", "copy", "--from", "sqlite:///missing/x.db", "--to", "postgresql://n@127.0.0.1:1/x"
    )
    assert result.returncode == 1
    assert "CONFIGURATION_ERROR" in result.stderr and "does not exist" in result.stderr


def test_postgres_passwords_are_masked() -> None:
    from lamina.config import redact_url

    assert redact_url("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("postgresql://h/db?user=u&password=pw&sslmode=require") == (
        "postgresql://h/db?user=u&password=***&sslmode=require"
    )
    settings = load_settings(database_url="postgresql://u:pw@127.0.0.1/db")
    assert "pw" not in settings.database_location()
