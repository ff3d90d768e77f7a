"""The CLI's lifecycle options: time fields, dedup, invalidate, purge-expired, time windows and
--infer (against the fake OpenAI-compatible server)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli.runner import run, run_json
from tests.fakes.openai_server import FakeOpenAI

U = ("--user-id", "u")


def test_time_dedup_invalidate_and_windows(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    first = run_json(
        capsys,
        data_dir,
        "memory",
        "add",
        "Bob lives in Oslo",
        "--layer",
        "user",
        *U,
        "--timestamp",
        "2020-02-02T00:00:00Z",
    )
    assert first["event_at"].startswith("2020-02-02")
    code, out, _ = run(
        capsys, data_dir, "memory", "add", "bob lives in OSLO", "--layer", "user", *U
    )
    assert code == 0 and "exact duplicate" in out
    other = run_json(
        capsys, data_dir, "memory", "add", "bob lives in oslo", "--layer", "user", *U, "--no-dedup"
    )
    assert other["id"] != first["id"]
    gone = run_json(capsys, data_dir, "memory", "invalidate", first["id"], "--at", "2024-01-01")
    assert gone[0]["valid_until"].startswith("2024-01-01")
    listed = run_json(capsys, data_dir, "memory", "list", *U)
    assert [m["id"] for m in listed["items"]] == [other["id"]]
    every = run_json(capsys, data_dir, "memory", "list", *U, "--include-invalid")
    assert every["total_count"] == 2
    old = run_json(
        capsys,
        data_dir,
        "memory",
        "search",
        "Oslo",
        *U,
        "--include-invalid",
        "--until",
        "2021-01-01",
        "--threshold",
        "0",
    )
    assert [h["memory"]["id"] for h in old["results"]] == [first["id"]]
    run_json(capsys, data_dir, "memory", "add", "brief", "--layer", "user", *U, "--ttl", "0.2")
    time.sleep(0.3)
    assert run_json(capsys, data_dir, "memory", "purge-expired") == {"removed": 1}
    history = run_json(capsys, data_dir, "memory", "history", first["id"])
    assert [e["operation"] for e in history] == ["add", "invalidate"]


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "add", "x", "--layer", "user", *U, "--ttl", "-1"),
        ("memory", "add", "x", "--layer", "user", *U, "--timestamp", "noon"),
        ("memory", "list", *U, "--since", "soon"),
        ("memory", "search", "x", *U, "--since", "2030-01-01", "--until", "2020-01-01"),
        ("memory", "invalidate", "no-such-id"),
        ("memory", "add", "x", "--layer", "user", *U, "--infer"),  # no chat model
    ],
)
def test_bad_lifecycle_options_exit_1_with_a_code(
    capsys: pytest.CaptureFixture[str], data_dir: Path, args: tuple[str, ...]
) -> None:
    code, out, _ = run(capsys, data_dir, *args, "--json")
    assert code == 1
    assert json.loads(out)["error"]["code"] in (
        "INVALID_ARGUMENT",
        "MEMORY_NOT_FOUND",
        "CONFIGURATION_ERROR",
    )
    assert run_json(capsys, data_dir, "memory", "list", *U, "--include-invalid")["total_count"] == 0


def test_infer_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeOpenAI() as llm:
        monkeypatch.setenv("LAMINA_LLM__MODEL", "fake")
        monkeypatch.setenv("LAMINA_LLM__BASE_URL", llm.base_url)
        llm.script('{"facts": ["Ivy likes jazz"]}', '{"decisions": [{"fact": 0, "event": "ADD"}]}')
        entry = run_json(
            capsys, data_dir, "memory", "add", "I love jazz", "--layer", "user", *U, "--infer"
        )
        assert entry["content"] == "I love jazz"
        assert [(f["fact"], f["event"]) for f in entry["facts"]] == [("Ivy likes jazz", "add")]
        chat = tmp_path / "chat.jsonl"
        chat.write_text(json.dumps({"role": "user", "content": "Jazz, and no longer rock."}) + "\n")
        llm.script(
            '{"facts": ["Ivy likes jazz", "Ivy no longer likes rock"]}',
            '{"decisions": [{"fact": 0, "event": "NOOP", "id": "1"}, {"fact": 1, "event": "ADD"}]}',
        )
        code, out, _ = run(capsys, data_dir, "memory", "add-messages", str(chat), *U, "--infer")
        assert code == 0
        assert "NOOP   Ivy likes jazz" in out and "ADD    Ivy no longer likes rock" in out
