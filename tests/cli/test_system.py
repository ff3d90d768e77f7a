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
