"""The CLI mirrors the library: every command, JSON output, errors with codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.cli import main


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(["--data-dir", str(data_dir), *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> Any:
    code, out, err = run(capsys, data_dir, *args, "--json")
    assert code == 0, (out, err)
    return json.loads(out)


def test_memory_commands_end_to_end(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    added = run_json(
        capsys,
        data_dir,
        "memory",
        "add",
        "Prefers dark mode in every editor",
        "--layer",
        "user",
        "--user-id",
        "alice",
        "--tag",
        "ui",
        "--metadata",
        '{"source": "chat"}',
        "--actor",
        "cli-test",
    )
    assert added["layer"] == "user" and added["metadata"] == {"source": "chat", "tags": ["ui"]}
    mid = added["id"]
    hits = run_json(
        capsys,
        data_dir,
        "memory",
        "search",
        "editor theme",
        "--user-id",
        "alice",
        "--threshold",
        "0.3",
        "--tag",
        "ui",
        "--filter",
        '{"source": "chat"}',
    )
    assert [h["memory"]["id"] for h in hits] == [mid]
    hybrid = run_json(
        capsys,
        data_dir,
        "memory",
        "search",
        "dark editor",
        "--user-id",
        "alice",
        "--mode",
        "hybrid",
        "--layer",
        "user",
    )
    assert hybrid[0]["memory"]["id"] == mid
    assert run_json(capsys, data_dir, "memory", "get", mid)["content"].startswith("Prefers")
    updated = run_json(
        capsys,
        data_dir,
        "memory",
        "update",
        mid,
        "--content",
        "Prefers light",
        "--metadata",
        '{"source": null}',
    )
    assert updated["content"] == "Prefers light" and updated["metadata"] == {"tags": ["ui"]}
    page = run_json(capsys, data_dir, "memory", "list", "--user-id", "alice", "--limit", "1")
    assert page["total_count"] == 1 and page["next_cursor"] is None
    assert run_json(capsys, data_dir, "memory", "delete", mid)["success"] is True
    assert run_json(capsys, data_dir, "memory", "delete", mid)["existed"] is False
    history = run_json(capsys, data_dir, "memory", "history", mid)
    assert [e["operation"] for e in history] == ["add", "update", "delete"]
    assert history[0]["actor"] == "cli-test"
    code, out, _ = run(capsys, data_dir, "memory", "history", mid)
    assert code == 0 and "delete" in out and "- Prefers light" in out


def test_human_output_and_hierarchy(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, out, _ = run(
        capsys,
        data_dir,
        "hierarchy",
        "register",
        "--project-id",
        "atlas",
        "--team-id",
        "platform",
        "--org-id",
        "eng",
        "--company-id",
        "acme",
    )
    assert code == 0 and "project atlas -> platform" in out
    code, out, _ = run(capsys, data_dir, "hierarchy", "defaults", "--org-id", "eng")
    assert code == 0 and "team * -> eng" in out
    resolved = run_json(
        capsys, data_dir, "hierarchy", "resolve", "--user-id", "u", "--project-id", "atlas"
    )
    assert resolved["identifiers"]["company_id"] == "acme"
    assert resolved["layers"] == ["user", "project", "team", "org", "company"]
    code, out, _ = run(
        capsys,
        data_dir,
        "memory",
        "add",
        "Team ships weekly",
        "--layer",
        "team",
        "--project-id",
        "atlas",
    )
    assert code == 0 and "[team: team_id=platform]" in out
    code, out, _ = run(
        capsys,
        data_dir,
        "memory",
        "search",
        "how often do we ship",
        "--user-id",
        "u",
        "--project-id",
        "atlas",
        "--threshold",
        "0.2",
    )
    assert code == 0 and "Team ships weekly" in out
    code, out, _ = run(capsys, data_dir, "memory", "list", "--project-id", "atlas")
    assert code == 0 and "-- 1 of 1" in out
    health = run_json(capsys, data_dir, "health")
    assert health["healthy"] and health["capabilities"]["embedding_dimensions"] == 384


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["memory", "add", "x", "--layer", "galaxy", "--user-id", "u"], "INVALID_LAYER"),
        (["memory", "add", "x", "--layer", "session", "--user-id", "u"], "MISSING_IDENTIFIER"),
        (["memory", "add", "   ", "--layer", "user", "--user-id", "u"], "INVALID_ARGUMENT"),
        (
            ["memory", "add", "x", "--layer", "user", "--user-id", "u", "--metadata", "{bad"],
            "INVALID_ARGUMENT",
        ),
        (
            ["memory", "search", "q", "--user-id", "u", "--filter", '{"a": {"like": 1}}'],
            "INVALID_FILTER",
        ),
        (["memory", "search", "q", "--user-id", "u", "--filter", "{"], "INVALID_FILTER"),
        (["memory", "search", "q" * 5000, "--user-id", "u"], "QUERY_TOO_LONG"),
        (["memory", "search", "q", "--user-id", "u", "--mode", "fuzzy"], "INVALID_ARGUMENT"),
        (["memory", "search", "q"], "MISSING_IDENTIFIER"),
        (["memory", "get", "missing"], "MEMORY_NOT_FOUND"),
        (["memory", "update", "missing", "--content", "x"], "MEMORY_NOT_FOUND"),
        (["memory", "history", "missing"], "MEMORY_NOT_FOUND"),
        (["memory", "list", "--user-id", "u", "--cursor", "zzz"], "INVALID_ARGUMENT"),
        (["--database-url", "mysql://x/db", "memory", "get", "id"], "CONFIGURATION_ERROR"),
        (
            ["--database-url", "postgresql://h:port/db", "memory", "get", "id"],
            "CONFIGURATION_ERROR",
        ),
    ],
)
def test_errors_print_code_and_exit_non_zero(
    capsys: pytest.CaptureFixture[str], data_dir: Path, args: list[str], code: str
) -> None:
    status, out, err = run(capsys, data_dir, *args)
    assert status == 1 and err.startswith(f"error: {code}: ") and "Traceback" not in err + out
    status, out, _ = run(capsys, data_dir, *args, "--json")
    assert status == 1 and json.loads(out)["error"]["code"] == code


def test_content_too_long_at_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "lamina.toml"
    config.write_text("[memory]\nmax_content_length = 10\n")
    status, out, _ = run(
        capsys,
        tmp_path / "d",
        "--config",
        str(config),
        "memory",
        "add",
        "this is longer than ten",
        "--layer",
        "user",
        "--user-id",
        "u",
        "--json",
    )
    error = json.loads(out)["error"]
    assert status == 1 and error["code"] == "CONTENT_TOO_LONG"
    assert error["details"]["max_length"] == 10


def test_a_real_process_prints_no_traceback(data_dir: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lamina",
            "--data-dir",
            str(data_dir),
            "memory",
            "add",
            "x",
            "--layer",
            "bogus",
            "--user-id",
            "u",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: INVALID_LAYER:") and "Traceback" not in proc.stderr
    usage = subprocess.run(
        [sys.executable, "-m", "lamina", "memory", "add"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert usage.returncode == 2 and "Missing argument" in usage.stderr


def test_help_lists_every_memory_command(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    code, out, _ = run(capsys, data_dir, "memory", "--help")
    assert code == 0
    for command in ("add", "search", "get", "update", "delete", "list", "history"):
        assert f"  {command}" in out


def test_provider_errors_at_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.fakes.openai_server import Failure, FakeOpenAI

    with FakeOpenAI() as server:
        config = tmp_path / "lamina.toml"
        config.write_text(
            f'[embedding]\nprovider = "openai"\nbase_url = "{server.base_url}"\n'
            'model = "fake"\ndimensions = 8\n[retry]\ninitial_delay = 0.01\nmax_delay = 0.02\n'
        )
        args = ["--config", str(config), "memory", "add", "x", "--layer", "user", "--user-id", "u"]
        for failures, code in (
            ([Failure(503)] * 4, "PROVIDER_ERROR"),
            ([Failure(429, {"Retry-After": "0"})] * 4, "RATE_LIMITED"),
            ([Failure(400)], "EMBEDDING_FAILED"),
            ([Failure(401)], "CONFIGURATION_ERROR"),
        ):
            server.fail_next(*failures)
            status, out, err = run(capsys, tmp_path / "d", *args)
            assert status == 1 and err.startswith(f"error: {code}: "), (code, err)
            assert "Traceback" not in out + err
        status, out, _ = run(capsys, tmp_path / "d", *args, "--json")
        assert status == 0 and json.loads(out)["content"] == "x"
