"""Human output (rich tables) and progress bars: bars go to standard error only when it is a
terminal (or LAMINA_PROGRESS=always) and never with --json; standard output stays the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lamina import Lamina
from tests.cli.runner import run, run_json
from tests.fakes.openai_server import Failure, FakeOpenAI


def two_items(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    for title in ("Use PostgreSQL", "Use httpx"):
        run_json(capsys, data_dir, "knowledge", "create", "adr", title, "--layer", "company")


def test_no_progress_bar_by_default_when_standard_error_is_no_terminal(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    two_items(capsys, data_dir)
    code, out, err = run(capsys, data_dir, "knowledge", "reindex", "--full")
    assert code == 0 and err == ""
    assert out.startswith("index at ") and out.endswith(": 2 indexed, 0 removed (full)\n")


def test_lamina_progress_always_draws_the_bar_on_standard_error(
    capsys: pytest.CaptureFixture[str], data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_items(capsys, data_dir)
    monkeypatch.setenv("LAMINA_PROGRESS", "always")
    code, out, err = run(capsys, data_dir, "knowledge", "reindex", "--full")
    assert code == 0 and "indexing knowledge" in err and "2/2" in err
    assert out.startswith("index at ") and "\x1b" not in out  # the bar stays off stdout

    # --json: the same JSON as without the variable, and no bar.
    code, out, err = run(capsys, data_dir, "knowledge", "reindex", "--full", "--json")
    assert code == 0 and err == ""
    assert json.loads(out)["indexed"] == 2 and json.loads(out)["full"] is True

    monkeypatch.setenv("LAMINA_PROGRESS", "never")
    code, _, err = run(capsys, data_dir, "knowledge", "reindex", "--full")
    assert code == 0 and err == ""


def test_embed_pending_counts_its_batches(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "d"
    with FakeOpenAI() as server:
        config = tmp_path / "lamina.toml"
        config.write_text(
            f'[embedding]\nprovider = "openai"\nbase_url = "{server.base_url}"\n'
            'model = "fake"\ndimensions = 8\n'
        )
        with Lamina(config_file=config, data_dir=data_dir) as ms:
            server.fail_next(Failure(400))  # the one background batch fails: all three wait
            ms.memory.bulk_add(
                [{"content": f"note {i}", "layer": "user", "user_id": "u"} for i in range(3)],
                background_embedding=True,
            )
            ms.memory.flush_embeddings()
        capsys.readouterr()
        monkeypatch.setenv("LAMINA_PROGRESS", "always")
        code, out, err = run(capsys, data_dir, "--config", str(config), "memory", "embed-pending")
        assert (code, out) == (0, "embedded 3 memories\n")
        assert "embedding memories" in err and "3/?" in err  # no total known ahead
        assert run_json(capsys, data_dir, "--config", str(config), "memory", "embed-pending") == {
            "embedded": 0
        }


def test_a_wrong_lamina_progress_is_a_configuration_error(
    capsys: pytest.CaptureFixture[str], data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAMINA_PROGRESS", "sometimes")
    code, _, err = run(capsys, data_dir, "knowledge", "reindex")
    assert code == 1 and err.startswith("error: CONFIGURATION_ERROR: LAMINA_PROGRESS must be")


def test_human_output_keeps_markup_like_text_as_it_is(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    content = "[bold]not bold[/bold] :smile: [user: x]"
    run_json(capsys, data_dir, "memory", "add", content, "--layer", "user", "--user-id", "u")
    code, out, _ = run(capsys, data_dir, "memory", "list", "--user-id", "u")
    assert code == 0 and content in out and "\x1b" not in out


def test_the_cli_imports_no_server_module() -> None:
    """`lamina --help` works with the core dependencies alone: nothing under lamina.server
    (a2a, uvicorn, mcp) is imported when the CLI loads."""
    probe = (
        "import sys; import lamina.cli; "
        "print(sorted(m for m in sys.modules if m.startswith(('lamina.server', 'a2a', 'mcp'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def test_commands_without_a_count_show_a_spinner(
    capsys: pytest.CaptureFixture[str], data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migrations, expiry and delete-all can run for minutes on a large store: their bar
    has no total (a spinner and the time taken); standard output and --json are as before."""
    run_json(capsys, data_dir, "memory", "add", "a", "--layer", "user", "--user-id", "u")
    monkeypatch.setenv("LAMINA_PROGRESS", "always")
    code, out, err = run(capsys, data_dir, "db", "upgrade")
    assert code == 0 and "applying migrations" in err and "\x1b" not in out
    assert out.startswith("sqlite store at schema version ")
    code, out, err = run(capsys, data_dir, "memory", "purge-expired")
    assert (code, out) == (0, "removed 0 expired memories\n") and "removing expired" in err
    code, out, err = run(capsys, data_dir, "memory", "delete-all", "--user-id", "u", "--yes")
    assert (code, out) == (0, "deleted 1 memories\n") and "deleting memories" in err
    code, out, err = run(capsys, data_dir, "db", "upgrade", "--json")
    assert code == 0 and err == "" and json.loads(out)["store"] == "sqlite"
