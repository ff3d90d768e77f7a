"""lamina memory delete-all | export | import, as a user runs them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.cli.runner import run, run_json


def add(capsys: pytest.CaptureFixture[str], data_dir: Path, content: str, *ids: str) -> str:
    added = run_json(capsys, data_dir, "memory", "add", content, "--layer", "user", *ids)
    return str(added["id"])


def test_export_import_round_trip(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    first = add(capsys, data_dir, "Alice likes aisle seats", "--user-id", "alice")
    add(capsys, data_dir, "Bob likes tea", "--user-id", "bob")
    code, out, _ = run(capsys, data_dir, "memory", "export", "--history", "--embeddings")
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["id"] == first and len(records) == 2
    assert {"embedding", "history", "content", "layer", "identifiers"} <= set(records[0])
    only = run(capsys, data_dir, "memory", "export", "--user-id", "bob")[1].splitlines()
    assert [json.loads(line)["content"] for line in only] == ["Bob likes tea"]

    target = tmp_path / "out" / "memories.jsonl"
    target.parent.mkdir()
    summary = run_json(
        capsys, data_dir, "memory", "export", "--history", "--embeddings", "-o", str(target)
    )
    assert summary == {"exported": 2, "file": str(target)}
    assert target.read_text(encoding="utf-8") == out
    assert list(target.parent.iterdir()) == [target]

    other = tmp_path / "other"
    report = run_json(capsys, other, "memory", "import", str(target), "--actor", "move")
    assert report == {"records": 2, "imported": 2, "skipped": 0, "embedded": 0}
    code, human, _ = run(capsys, other, "memory", "import", str(target))
    assert code == 0 and "imported 0 of 2 memories (2 already present, 0 embedded)" in human
    again = run(capsys, other, "memory", "export", "--history", "--embeddings")[1]
    assert again == out


def test_import_from_standard_input_and_mem0(
    capsys: pytest.CaptureFixture[str], data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = json.dumps({"content": "piped", "layer": "user", "identifiers": {"user_id": "u"}})
    monkeypatch.setattr("sys.stdin", io.StringIO(line + "\n"))
    assert run_json(capsys, data_dir, "memory", "import", "-")["imported"] == 1
    mem0 = {"id": "m-1", "memory": "Likes hiking", "user_id": "alex", "agent_id": "helper"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(mem0) + "\n"))
    report = run_json(capsys, data_dir, "memory", "import", "-", "--format", "mem0")
    assert report["imported"] == 1
    agent = run(capsys, data_dir, "memory", "export", "--layer", "agent")[1]
    assert json.loads(agent)["identifiers"] == {"agent_id": "helper", "user_id": "alex"}


def test_a_bad_line_is_refused_with_its_number(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    good = json.dumps({"content": "fine", "layer": "user", "identifiers": {"user_id": "u"}})
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{{oops\n", encoding="utf-8")
    code, out, _ = run(capsys, data_dir, "memory", "import", str(path), "--json")
    error = json.loads(out)["error"]
    assert code == 1 and error["code"] == "INVALID_ARGUMENT" and error["details"]["line"] == 2
    code, _, err = run(capsys, data_dir, "memory", "import", str(path))
    assert code == 1 and "error: INVALID_ARGUMENT: line 2: not valid JSON" in err
    assert run(capsys, data_dir, "memory", "export")[1] == ""  # nothing half-imported
    code, _, err = run(capsys, data_dir, "memory", "import", str(tmp_path / "none.jsonl"))
    assert code == 1 and "no such file" in err
    code, _, err = run(capsys, data_dir, "memory", "import", str(path), "--format", "csv")
    assert code == 2 and "Invalid value for '--format'" in err
    code, _, err = run(capsys, data_dir, "memory", "export", "-o", str(tmp_path / "no" / "x"))
    assert code == 1 and "cannot write" in err


def test_delete_all(
    capsys: pytest.CaptureFixture[str], data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mid = add(capsys, data_dir, "Alice likes aisle seats", "--user-id", "alice")
    add(capsys, data_dir, "Bob likes tea", "--user-id", "bob")
    code, out, _ = run(capsys, data_dir, "memory", "delete-all", "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "MISSING_IDENTIFIER"
    # A no, or no answer at all (the input ends), deletes nothing and exits with status 1.
    for answer in ("n\n", ""):
        monkeypatch.setattr("sys.stdin", io.StringIO(answer))
        code, out, err = run(capsys, data_dir, "memory", "delete-all", "--user-id", "alice")
        assert (code, out) == (1, "")
        assert "Delete every memory of user_id=alice?" in err
        assert err.rstrip().endswith("aborted: nothing was done (--yes skips this question)")
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, _, err = run(
        capsys, data_dir, "memory", "delete-all", "--user-id", "alice", "--include-sessions"
    )
    assert code == 1 and "Delete every memory and session of user_id=alice?" in err
    assert run_json(capsys, data_dir, "memory", "get", mid)["id"] == mid
    deleted = run_json(
        capsys, data_dir, "memory", "delete-all", "--user-id", "alice", "--yes", "--actor", "dpo"
    )
    assert deleted == {"deleted": 1}
    events = run_json(capsys, data_dir, "memory", "history", mid)
    assert [(e["operation"], e["new_content"]) for e in events][-1] == ("delete", None)
    assert all(e["old_content"] is None and e["new_content"] is None for e in events)
    code, human, _ = run(capsys, data_dir, "memory", "delete-all", "--user-id", "bob", "--yes")
    assert code == 0 and human.strip() == "deleted 1 memories"


def test_delete_all_with_sessions(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    run_json(
        capsys, data_dir, "memory", "add", "Alice's trip", "--layer", "session",
        "--session-id", "trip", "--user-id", "alice",
    )  # fmt: skip
    for text in ("I fly on Monday", "Aisle seat please"):
        assert run(capsys, data_dir, "session", "append", "trip", "user", text)[0] == 0
    assert run(capsys, data_dir, "session", "append", "other", "user", "kept")[0] == 0
    done = run_json(
        capsys, data_dir, "memory", "delete-all", "--user-id", "alice", "--include-sessions",
        "--yes",
    )  # fmt: skip
    assert done == {
        "deleted": 1,
        "sessions": ["trip"],
        "session_messages": 2,
        "observations": 0,
        "reflections": 0,
        "graph_relations": 0,
    }
    shown = run_json(capsys, data_dir, "session", "show", "trip", "--json")
    assert shown["messages"] == [] and shown["observations"] == []
    code, human, _ = run(
        capsys, data_dir, "memory", "delete-all", "--session-id", "other", "--user-id", "bob",
        "--include-sessions", "--yes",
    )  # fmt: skip
    assert code == 0
    assert human.strip() == (
        "deleted 0 memories; of 1 session(s): 1 messages, 0 observations, 0 reflections, "
        "0 graph relations"
    )


def test_a_json_document_without_its_format_says_what_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """`memory import mem0.json` without --format mem0: not "line 1: not valid JSON" but
    what the document holds and the --format that reads it; nothing is imported."""
    mem0 = [
        {"id": "m-1", "memory": "Likes hiking", "user_id": "alex"},
        {"id": "m-2", "memory": "Prefers German", "user_id": "alex", "agent_id": "helper"},
    ]
    pretty = tmp_path / "mem0.json"
    pretty.write_text(json.dumps({"results": mem0}, indent=2), encoding="utf-8")
    one_line = tmp_path / "mem0-one-line.json"
    one_line.write_text(json.dumps(mem0), encoding="utf-8")
    hint = (
        "one JSON document holding 2 mem0 memories, not lamina's JSON Lines: import it "
        'with format="mem0" (lamina memory import --format mem0)'
    )
    for path in (pretty, one_line):
        code, out, err = run(capsys, data_dir, "memory", "import", str(path))
        assert (code, out) == (1, "")
        assert err.strip() == f"error: INVALID_ARGUMENT: {path}: {hint}"
        code, out, _ = run(capsys, data_dir, "memory", "import", str(path), "--json")
        error = json.loads(out)["error"]
        assert code == 1 and error["code"] == "INVALID_ARGUMENT"
        assert error["details"] == {"field": "format", "found": "mem0"}
    monkeypatch.setattr("sys.stdin", io.StringIO(pretty.read_text(encoding="utf-8")))
    code, _, err = run(capsys, data_dir, "memory", "import", "-")
    assert code == 1 and err.strip() == f"error: INVALID_ARGUMENT: source: {hint}"
    assert run(capsys, data_dir, "memory", "export")[1] == ""  # nothing imported
    # lamina's own records as one JSON list (or one record over several lines).
    record = {"content": "fine", "layer": "user", "identifiers": {"user_id": "u"}}
    listed = tmp_path / "records.json"
    listed.write_text(json.dumps([record, record], indent=2), encoding="utf-8")
    code, _, err = run(capsys, data_dir, "memory", "import", str(listed))
    assert code == 1 and err.strip() == (
        f"error: INVALID_ARGUMENT: {listed}: one JSON document holding a list of 2 items, not "
        "JSON Lines: lamina's format is one record a line, as `lamina memory export` writes it "
        "(mem0's memories: --format mem0)"
    )
    spread = tmp_path / "record.json"
    spread.write_text(json.dumps(record, indent=2), encoding="utf-8")
    code, _, err = run(capsys, data_dir, "memory", "import", str(spread))
    assert code == 1 and f"{spread}: one JSON object over several lines, not JSON Lines" in err
    # With its format, the document is imported (from a file and from standard input).
    assert run_json(capsys, data_dir, "memory", "import", str(pretty), "--format", "mem0") == {
        "records": 2, "imported": 2, "skipped": 0, "embedded": 2,
    }  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO(pretty.read_text(encoding="utf-8")))
    again = run_json(capsys, data_dir, "memory", "import", "-", "--format", "mem0")
    assert again["skipped"] == 2
