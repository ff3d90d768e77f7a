"""lamina context … mirrors ms.context: the four stored layers, retrieval and prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import run, run_json


def test_the_cli_mirrors_the_library(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    saved = run_json(
        capsys,
        data_dir,
        "context",
        "knowledge",
        "save",
        "db",
        "Production runs PostgreSQL 16",
        "--category",
        "fact",
        "--tag",
        "infra",
    )
    assert saved["version"] == 1 and saved["tags"] == ["infra"]
    again = run_json(
        capsys, data_dir, "context", "knowledge", "save", "db", "Production runs PostgreSQL 17"
    )
    assert again["version"] == 2
    versions = run_json(capsys, data_dir, "context", "knowledge", "get", "db", "--versions")
    assert [v["version"] for v in versions] == [2, 1]
    hits = run_json(capsys, data_dir, "context", "knowledge", "search", "postgres version")
    assert hits[0]["item"]["content"].endswith("17")
    assert run_json(capsys, data_dir, "context", "knowledge", "list")["total_count"] == 1

    run_json(
        capsys,
        data_dir,
        "context",
        "learning",
        "save",
        "disk full on runner",
        "--fix",
        "prune docker images",
        "--category",
        "tool_error",
    )
    outcome = run_json(
        capsys, data_dir, "context", "learning", "outcome", "disk full on runner", "--success"
    )
    assert outcome["success_count"] == 1
    run_json(
        capsys,
        data_dir,
        "context",
        "skill",
        "save",
        "rollback",
        "Roll back a deploy",
        "--type",
        "script",
        "--parameters",
        '{"release": {"type": "string"}}',
    )
    assert (
        run_json(capsys, data_dir, "context", "skill", "list", "--type", "script")["total_count"]
        == 1
    )
    run_json(
        capsys,
        data_dir,
        "context",
        "ref",
        "save",
        "pg-docs",
        "https://www.postgresql.org/docs/",
        "--summary",
        "PostgreSQL manual",
    )
    assert (
        run_json(capsys, data_dir, "context", "ref", "search", "postgres manual")[0]["item"]["name"]
        == "pg-docs"
    )

    result = run_json(
        capsys, data_dir, "context", "retrieve", "runner disk is full again, postgres docs?"
    )
    assert set(result["items"]) == {
        "user_knowledge",
        "skill_patterns",
        "external_knowledge",
        "agent_learnings",
    }
    assert result["items"]["agent_learnings"][0]["fields"]["fix"] == "prune docker images"
    prompt = run_json(
        capsys, data_dir, "context", "prompt", "runner disk full", "--base", "Be brief."
    )["prompt"]
    assert prompt.startswith("Be brief.\n\n") and "## Known Solutions" in prompt
    code, out, _ = run(capsys, data_dir, "context", "prompt", "?!", "--base", "Only this.")
    assert (code, out) == (0, "Only this.\n")

    deleted = run_json(capsys, data_dir, "context", "knowledge", "delete", "db")
    assert deleted["deleted"] == 2

    errors = [
        (("context", "knowledge", "get", "db"), "ITEM_NOT_FOUND"),
        (("context", "knowledge", "save", "k", "c", "--category", "gossip"), "INVALID_ARGUMENT"),
        (("context", "retrieve", "x y", "--layer", "bogus"), "INVALID_LAYER"),
        (("context", "retrieve", "disk", "--max-per-layer", "0"), "INVALID_ARGUMENT"),
        (("context", "skill", "save", "s", "d", "--parameters", "{nope"), "INVALID_ARGUMENT"),
        (("context", "knowledge", "search", "q" * 5000), "QUERY_TOO_LONG"),
    ]
    for args, code_name in errors:
        code, out, err = run(capsys, data_dir, *args)
        assert code == 1 and f"error: {code_name}:" in err, (args, out, err)
        code, out, _ = run(capsys, data_dir, *args, "--json")
        assert code == 1 and json.loads(out)["error"]["code"] == code_name
    # Human output works too.
    code, out, _ = run(capsys, data_dir, "context", "learning", "list")
    assert code == 0 and "disk full on runner" in out and "1 of 1" in out


def test_every_save_option_reaches_the_store(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    """Each layer's save passes its arguments by position and its options by keyword
    (tags as a list, --parameters / --metadata as JSON objects, --type under its name)."""
    knowledge = run_json(
        capsys, data_dir, "context", "knowledge", "save", "k", "c", "--category", "rule",
        "--source", "wiki", "--relevance", "0.25", "--tag", "a", "--tag", "b",
    )  # fmt: skip
    assert (knowledge["key"], knowledge["content"], knowledge["category"]) == ("k", "c", "rule")
    assert (knowledge["source"], knowledge["relevance_score"]) == ("wiki", 0.25)
    assert knowledge["tags"] == ["a", "b"]
    learning = run_json(
        capsys, data_dir, "context", "learning", "save", "oom", "--fix", "more memory",
        "--error-pattern", "Killed", "--diagnosis", "too small", "--category", "timeout",
    )  # fmt: skip
    assert (learning["trigger"], learning["fix"], learning["error_pattern"]) == (
        "oom",
        "more memory",
        "Killed",
    )
    assert (learning["diagnosis"], learning["category"]) == ("too small", "timeout")
    skill = run_json(
        capsys, data_dir, "context", "skill", "save", "s", "d", "--definition", "step 1",
        "--parameters", '{"n": {"type": "integer"}}',
    )  # fmt: skip
    assert (skill["type"], skill["definition"]) == ("composite", "step 1")
    assert skill["parameters"] == {"n": {"type": "integer"}}
    ref = run_json(
        capsys, data_dir, "context", "ref", "save", "r", "https://example.org", "--type",
        "document", "--metadata", '{"pages": 3}', "--summary", "a doc",
    )  # fmt: skip
    assert (ref["location"], ref["ref_type"], ref["summary"]) == (
        "https://example.org",
        "document",
        "a doc",
    )
    assert ref["metadata"] == {"pages": 3}
