"""Run the CLI in-process as a user would (``main``, with its exit status) and read what it
printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lamina.cli import main


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(["--data-dir", str(data_dir), *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> Any:
    code, out, err = run(capsys, data_dir, *args, "--json")
    assert code == 0, (out, err)
    return json.loads(out)
