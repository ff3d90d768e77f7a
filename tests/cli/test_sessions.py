"""lamina session … in human form (tests/observational/test_observational.py runs every
session command against a fake model, with --json)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.runner import run, run_json


def test_session_list_is_a_table(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, out, _ = run(capsys, data_dir, "session", "list")
    assert (code, out) == (0, "no sessions\n")
    run_json(capsys, data_dir, "session", "append", "chat:1", "user", "hello")
    run_json(capsys, data_dir, "session", "append", "chat:1", "assistant", "hi")
    run_json(capsys, data_dir, "session", "append", "chat:2", "user", "[not markup]")
    code, out, _ = run(capsys, data_dir, "session", "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["session", "messages"]
    assert [line.split() for line in lines[2:]] == [["chat:1", "2"], ["chat:2", "1"]]
    code, out, _ = run(capsys, data_dir, "session", "show", "chat:2")
    assert code == 0 and "#0 [user] [not markup]" in out


def test_session_system_prompt_is_shown_set_and_cleared(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    code, out, _ = run(capsys, data_dir, "session", "system-prompt", "chat:1")
    assert (code, out) == (0, "no system prompt\n")
    set_ = run_json(capsys, data_dir, "session", "system-prompt", "chat:1", "--set", "Be brief.")
    assert set_ == {"session_key": "chat:1", "system_prompt": "Be brief."}
    code, out, _ = run(capsys, data_dir, "session", "system-prompt", "chat:1")
    assert (code, out) == (0, "Be brief.\n")
    code, out, _ = run(capsys, data_dir, "session", "show", "chat:1")
    assert code == 0 and out.startswith("system prompt: Be brief.\n")
    assert run_json(capsys, data_dir, "session", "show", "chat:1")["system_prompt"] == "Be brief."
    code, _, err = run(
        capsys, data_dir, "session", "system-prompt", "chat:1", "--set", "x", "--clear"
    )
    assert code == 1 and "INVALID_ARGUMENT" in err
    cleared = run_json(capsys, data_dir, "session", "system-prompt", "chat:1", "--clear")
    assert cleared == {"session_key": "chat:1", "system_prompt": None}
    assert run_json(capsys, data_dir, "session", "show", "chat:1")["system_prompt"] is None


def test_context_prompt_starts_from_the_sessions_kept_base_prompt(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    """As the context-aware model and the context_prompt tool: without --base, a session's
    prompt starts from its kept base system prompt; a --base given wins and is not kept."""
    run_json(capsys, data_dir, "session", "system-prompt", "chat:1", "--set", "Be brief.")
    kept = run_json(capsys, data_dir, "context", "prompt", "deploy", "--session", "chat:1")
    assert kept["prompt"].startswith("Be brief.")
    given = run_json(
        capsys, data_dir, "context", "prompt", "deploy", "--session", "chat:1", "--base", "Be kind."
    )
    assert given["prompt"].startswith("Be kind.") and "Be brief." not in given["prompt"]
    other = run_json(capsys, data_dir, "context", "prompt", "deploy", "--session", "chat:2")
    assert "Be brief." not in other["prompt"]
    alone = run_json(capsys, data_dir, "context", "prompt", "deploy")
    assert "Be brief." not in alone["prompt"]
    code, out, _ = run(capsys, data_dir, "session", "system-prompt", "chat:1")
    assert (code, out) == (0, "Be brief.\n")
