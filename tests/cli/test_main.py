"""The CLI's entry point: errors print their code and exit non-zero (the error object with
--json), usage mistakes exit 2, and a real process never prints a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.runner import run


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
