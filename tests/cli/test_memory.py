"""lamina memory … and lamina hierarchy … mirror ms.memory: every command, JSON output, and
the human tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import run, run_json


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
        "--tag",
        "ui",
        "--filter",
        '{"source": "chat"}',
    )
    assert [h["memory"]["id"] for h in hits["results"]] == [mid]
    parts = hits["results"][0]["parts"]
    assert parts["semantic"] > 0 and parts["keyword"] > 0 and hits["below_threshold"] == 0
    nothing = run_json(
        capsys, data_dir, "memory", "search", "quarterly tax filing", "--user-id", "alice"
    )
    assert nothing == {"results": [], "below_threshold": 1}
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
    assert hybrid["results"][0]["memory"]["id"] == mid
    # The same text stored again (--no-dedup): search leaves the near-duplicate out unless
    # --no-collapse.
    again = ("memory", "add", "Prefers dark mode in every editor", "--layer", "user")
    twin = run_json(capsys, data_dir, *again, "--user-id", "alice", "--no-dedup")["id"]
    query = ("memory", "search", "dark editor", "--user-id", "alice")
    assert len(run_json(capsys, data_dir, *query)["results"]) == 1
    both = run_json(capsys, data_dir, *query, "--no-collapse")["results"]
    assert {h["memory"]["id"] for h in both} == {mid, twin}
    assert run_json(capsys, data_dir, "memory", "delete", twin)["existed"] is True
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
    assert code == 0 and "delete" in out and "- Prefers light" not in out
    assert "(deleted: its content and metadata are forgotten)" in out


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
    # A table: score, layer, then the memory with its id, date and identifiers below it.
    header, rule, row = out.splitlines()[:3]
    assert header.split() == ["score", "layer", "memory"] and set(rule) == {"─"}
    assert row.split()[1:] == ["team", "Team", "ships", "weekly"]
    assert "team_id=platform" in out
    code, out, _ = run(capsys, data_dir, "memory", "list", "--project-id", "atlas")
    assert code == 0 and "-- 1 of 1" in out
    assert out.splitlines()[0].split() == ["layer", "memory"] and "Team ships weekly" in out
    health = run_json(capsys, data_dir, "health")
    assert health["healthy"] and health["capabilities"]["embedding_dimensions"] == 384


def test_help_lists_every_memory_command(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    code, out, _ = run(capsys, data_dir, "memory", "--help")
    assert code == 0
    for command in ("add", "search", "get", "update", "delete", "list", "history"):
        assert f"  {command}" in out


def test_search_refuses_a_threshold_outside_zero_to_one(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    run_json(
        capsys, data_dir, "memory", "add", "Alice likes aisle seats", "--layer", "user",
        "--user-id", "alice",
    )  # fmt: skip
    for bad, shown in (("2", "2"), ("-1", "-1"), ("nan", None)):
        code, out, err = run(
            capsys, data_dir, "memory", "search", "aisle", "--user-id", "alice", "--threshold", bad
        )
        assert (code, out) == (1, "")
        assert err.startswith("error: INVALID_ARGUMENT: threshold must be ")
        if shown is not None:
            assert err.strip().endswith(f"threshold must be from 0 to 1, not {shown}")
        code, out, _ = run(
            capsys, data_dir, "memory", "search", "aisle", "--user-id", "a", "--threshold", bad,
            "--json",
        )  # fmt: skip
        assert code == 1 and json.loads(out)["error"]["code"] == "INVALID_ARGUMENT"
    found = run_json(
        capsys, data_dir, "memory", "search", "aisle", "--user-id", "alice", "--threshold", "0"
    )
    assert [h["memory"]["content"] for h in found["results"]] == ["Alice likes aisle seats"]
