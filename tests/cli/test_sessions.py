"""lamina session … in human form (tests/test_observational.py runs every session command
against a fake model, with --json)."""

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
