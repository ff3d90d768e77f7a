"""lamina memory add-messages FILE.jsonl: a conversation in, one memory per line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import run, run_json

LINES = [
    {
        "role": "user",
        "name": "Caroline",
        "content": "I went to a support group 🌈",
        "timestamp": "2023-05-08T13:56:00",
    },
    {"role": "user", "name": "Melanie", "content": "  That's brave!\tTell me more.  "},
]


def _file(tmp_path: Path, lines: list[object], name: str = "chat.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(
        "\n".join(json.dumps(m, ensure_ascii=False) for m in lines) + "\n\n", encoding="utf-8"
    )
    return path


def _count(capsys: pytest.CaptureFixture[str], data_dir: Path) -> int:
    page = run_json(capsys, data_dir, "memory", "list", "--user-id", "u")
    total: int = page["total_count"]
    return total


def test_add_messages_from_a_jsonl_file(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    path = _file(tmp_path, LINES)
    added = run_json(
        capsys,
        data_dir,
        "memory",
        "add-messages",
        str(path),
        "--user-id",
        "u",
        "--conversation-id",
        "conv-26",
        "--metadata",
        '{"source": "cli"}',
    )
    assert added["conversation_id"] == "conv-26" and added["layer"] == "user"
    assert [m["content"] for m in added["memories"]] == [m["content"] for m in LINES]
    first = added["memories"][0]["metadata"]
    assert first["source"] == "cli" and first["conversation"]["speaker"] == "Caroline"
    assert first["conversation"]["timestamp"] == "2023-05-08T13:56:00+00:00"
    code, out, err = run(
        capsys,
        data_dir,
        "memory",
        "add-messages",
        str(path),
        "--user-id",
        "u",
        "--conversation-id",
        "conv-26",
    )
    assert code == 0, err
    assert "stored 2 messages in layer user, conversation conv-26 (positions 2 to 3)" in out
    assert _count(capsys, data_dir) == 4


@pytest.mark.parametrize(
    ("lines", "field"),
    [
        ([LINES[0], {"role": "robot", "content": "x"}], "messages[1].role"),
        ([LINES[0], {"role": "user", "content": ""}], "messages[1].content"),
        (
            [LINES[0], {"role": "user", "content": "x", "timestamp": "soon"}],
            "messages[1].timestamp",
        ),
        ([LINES[0], ["not", "an", "object"]], "messages[1]"),
        ([], "messages"),
    ],
)
def test_bad_lines_store_nothing(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    tmp_path: Path,
    lines: list[object],
    field: str,
) -> None:
    path = _file(tmp_path, lines)
    code, out, _ = run(
        capsys, data_dir, "memory", "add-messages", str(path), "--user-id", "u", "--json"
    )
    assert code == 1
    error = json.loads(out)["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["details"]["field"] == field
    assert _count(capsys, data_dir) == 0


def test_a_line_that_is_no_json_and_a_missing_file(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(LINES[0]) + "\n{oops\n", encoding="utf-8")
    code, _, err = run(capsys, data_dir, "memory", "add-messages", str(path), "--user-id", "u")
    assert code == 1 and "INVALID_ARGUMENT" in err and "line 2" in err
    code, _, err = run(
        capsys, data_dir, "memory", "add-messages", str(tmp_path / "absent.jsonl"), "--user-id", "u"
    )
    assert code == 1 and "cannot read" in err
    assert _count(capsys, data_dir) == 0


def test_progress_bar_on_a_large_file(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAMINA_PROGRESS", "always")
    lines = [{"role": "user", "content": f"message {i}"} for i in range(300)]
    code, out, err = run(
        capsys, data_dir, "memory", "add-messages", str(_file(tmp_path, lines)), "--user-id", "u"
    )
    assert code == 0 and "stored 300 messages" in out
    assert "embedding messages" in err and "300/300" in err
