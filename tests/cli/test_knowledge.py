"""lamina knowledge … mirrors ms.knowledge (and the errors of both knowledge and governance
commands carry their codes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.runner import run, run_json


def test_knowledge_commands_end_to_end(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    body = tmp_path / "body.md"
    body.write_text("## Decision\nUse PostgreSQL.\n")
    made = run_json(
        capsys,
        data_dir,
        "knowledge",
        "create",
        "adr",
        "Use PostgreSQL",
        "--layer",
        "team",
        "--layer-id",
        "platform",
        "--summary",
        "One database.",
        "--body-file",
        str(body),
        "--tag",
        "db",
        "--author",
        "alice",
        "--message",
        "Add ADR",
    )
    assert (
        made["item"]["id"] == "adr-0001"
        and made["item"]["body"] == "## Decision\nUse PostgreSQL.\n"
    )
    run_json(capsys, data_dir, "knowledge", "update", "adr-0001", "--summary", "Only PostgreSQL.")
    run_json(capsys, data_dir, "knowledge", "status", "adr-0001", "proposed")
    done = run_json(
        capsys, data_dir, "knowledge", "status", "adr-0001", "accepted", "--author", "bob"
    )
    assert done["item"]["status"] == "accepted"

    got = run_json(capsys, data_dir, "knowledge", "get", "adr-0001", "--history")
    assert got["item"]["summary"] == "Only PostgreSQL." and len(got["history"]) == 4
    listed = run_json(capsys, data_dir, "knowledge", "list", "--layer", "team")
    assert [i["id"] for i in listed["items"]] == ["adr-0001"]
    assert run_json(capsys, data_dir, "knowledge", "list", "--status", "draft")["items"] == []
    hits = run_json(capsys, data_dir, "knowledge", "search", "database choice")
    assert hits[0]["item"]["id"] == "adr-0001"
    history = run_json(capsys, data_dir, "knowledge", "history", "adr-0001")
    assert history[0]["author"].startswith("bob")
    diff = run_json(capsys, data_dir, "knowledge", "diff", "adr-0001")
    assert "+status: accepted" in diff["diff"]

    promo = run_json(
        capsys,
        data_dir,
        "knowledge",
        "promote",
        "adr-0001",
        "--to-layer",
        "company",
        "--reason",
        "all teams",
    )
    assert promo["status"] == "pending"
    decided = run_json(
        capsys,
        data_dir,
        "knowledge",
        "decide",
        promo["id"],
        "approve",
        "--approval",
        "specialization",
        "--new-id",
        "adr-company-db",
    )
    assert decided["status"] == "approved" and decided["promoted_id"] == "adr-company-db"
    assert (
        run_json(capsys, data_dir, "knowledge", "promotions", "--status", "approved")[0]["id"]
        == promo["id"]
    )
    reindexed = run_json(capsys, data_dir, "knowledge", "reindex", "--full")
    assert reindexed["full"] and reindexed["indexed"] == 2

    # Human output.
    code, out, _ = run(capsys, data_dir, "knowledge", "get", "adr-0001")
    assert code == 0 and "adr-0001  [adr, team/platform, accepted]  Use PostgreSQL" in out
    code, out, _ = run(capsys, data_dir, "knowledge", "history", "adr-0001")
    assert code == 0 and "[accepted]" in out
    code, out, _ = run(capsys, data_dir, "knowledge", "list")
    lines = out.splitlines()
    assert lines[0].split() == ["id", "type", "layer", "status", "title"]
    assert lines[2].split()[:5] == ["adr-0001", "adr", "team/platform", "accepted", "Use"]
    assert "Only PostgreSQL." in out and "-- 2 of 2" in out
    code, out, _ = run(capsys, data_dir, "knowledge", "search", "database choice")
    assert out.splitlines()[0].split() == ["score", "id", "type", "layer", "status", "title"]
    assert "adr-0001" in out
    code, out, _ = run(capsys, data_dir, "knowledge", "search", "zzzz", "--mode", "keyword")
    assert (code, out) == (0, "nothing found\n")


def test_cli_errors_carry_codes(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, _, err = run(
        capsys,
        data_dir,
        "knowledge",
        "create",
        "adr",
        "x",
        "--layer",
        "team",
        "--layer-id",
        "../../etc",
    )
    assert code == 1 and "INVALID_ARGUMENT" in err
    code, _, err = run(capsys, data_dir, "knowledge", "get", "adr-0404")
    assert code == 1 and "ITEM_NOT_FOUND" in err
    run(capsys, data_dir, "knowledge", "create", "adr", "x", "--layer", "company")
    code, _, err = run(capsys, data_dir, "knowledge", "status", "adr-0001", "accepted")
    assert code == 1 and "INVALID_TRANSITION" in err
    code, _, err = run(
        capsys,
        data_dir,
        "knowledge",
        "create",
        "spec",
        "s",
        "--layer",
        "company",
        "--body",
        "password = hunter2hunter2!",
    )
    assert code == 1 and "POLICY_VIOLATION" in err and "hunter2" not in err
    code, _, err = run(
        capsys,
        data_dir,
        "knowledge",
        "create",
        "policy",
        "p",
        "--layer",
        "company",
        "--rules",
        "[not json",
    )
    assert code == 1 and "INVALID_ARGUMENT" in err
    code, _, err = run(capsys, data_dir, "governance", "validate")
    assert code == 1 and "nothing to validate" in err
    code, out, _ = run(capsys, data_dir, "knowledge", "--help")
    for name in (
        "create",
        "get",
        "list",
        "search",
        "update",
        "status",
        "history",
        "diff",
        "promote",
        "decide",
        "promotions",
        "reindex",
    ):
        assert name in out
    code, out, _ = run(capsys, data_dir, "governance", "--help")
    assert all(name in out for name in ("validate", "drift", "policies"))
