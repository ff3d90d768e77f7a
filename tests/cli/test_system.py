"""lamina info and lamina health in human form (tests/test_data_location.py checks what
info reports, with --json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import run, run_json


def test_info_prints_one_labelled_line_per_fact(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    report = run_json(capsys, data_dir, "info")
    code, out, _ = run(capsys, data_dir, "info")
    labels = [
        "lamina",
        "data directory",
        "config file",
        "database",
        "knowledge",
        "tenant",
        "embedding",
        "extras",
    ]
    lines = out.splitlines()  # long values (paths) run on: one line each, never broken
    assert code == 0 and [next(x for x in labels if s.startswith(x)) for s in lines] == labels
    flat = " ".join(out.split())
    assert f"data directory {report['data_dir']} (from {report['data_dir_source']})" in flat
    assert f"tenant {report['tenant_id']}" in flat and "config file none" in flat


def test_health(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, out, _ = run(capsys, data_dir, "health")
    assert code == 0 and json.loads(out)["healthy"] is True


def test_demo_tours_memories_context_knowledge_and_governance(
    capsys: pytest.CaptureFixture[str], data_dir: Path
) -> None:
    """``lamina demo`` stores its samples in the 'demo' tenant and prints each step: the
    searches in every mode, the layers reached, the prompt, knowledge and governance."""
    for _ in range(2):  # run again, it starts over: the same five memories, not ten
        code, out, err = run(capsys, data_dir, "demo")
        assert code == 0, err
        assert "stored 5 memories in" in out and "(tenant 'demo')" in out
        for mode in ("hybrid", "semantic", "keyword"):
            assert f"{mode} search: 'which database does the project use'" in out
        assert "[project] Project Atlas stores its data in PostgreSQL 15" in out
        assert "layers reached by user alice in project atlas:\n  user, project, team" in out
        assert "Deploys happen on Fridays only after 10:00" in out.split("system prompt")[1]
        assert "knowledge search 'which database do we use':" in out
        assert "block: " in out and "no-requests: use httpx (async, HTTP/2)" in out
        assert "valid: False" in out
    listed = run_json(
        capsys,
        data_dir,
        "--tenant",
        "demo",
        "memory",
        "list",
        "--user-id",
        "alice",
        "--project-id",
        "atlas",
    )
    assert len(listed["items"]) == 5
