"""lamina governance … mirrors ms.governance: policies in force, validation (exit status 3
when invalid) and drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import run, run_json


def test_governance_commands(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    rules = [
        {
            "id": "no-requests",
            "target": "dependency",
            "operator": "must_not_use",
            "value": "requests",
            "severity": "block",
        },
        {
            "id": "no-todo",
            "target": "code",
            "operator": "must_not_match",
            "value": "TODO",
            "severity": "warn",
        },
    ]
    run_json(
        capsys,
        data_dir,
        "knowledge",
        "create",
        "policy",
        "Engineering basics",
        "--layer",
        "company",
        "--status",
        "accepted",
        "--mode",
        "mandatory",
        "--rules",
        json.dumps(rules),
    )
    policies = run_json(capsys, data_dir, "governance", "policies")
    assert [p["id"] for p in policies] == ["builtin-secrets", "policy-0001"]

    source = tmp_path / "app.py"
    source.write_text("x = 1  # TODO\n")
    code, out, _ = run(capsys, data_dir, "governance", "validate", "--file", str(source), "--json")
    result = json.loads(out)
    assert code == 0 and result["is_valid"] and result["violations"][0]["rule_id"] == "no-todo"
    code, out, _ = run(capsys, data_dir, "governance", "validate", "--dependency", "requests==2.32")
    assert code == 3 and "INVALID" in out and "no-requests" in out

    drift = run_json(
        capsys,
        data_dir,
        "governance",
        "drift",
        "--file",
        str(source),
        "--contexts-json",
        json.dumps([{"dependencies": ["requests"]}]),
    )
    assert drift["contexts"] == 2 and 0 < drift["score"] < 1
