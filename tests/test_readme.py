"""The README's shell examples work as written after the quick start, with `lamina` on the
PATH from .venv (as the README says), run in order in a fresh directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def shell_examples() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it from the shell", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_shell_examples_run(tmp_path: Path) -> None:
    lines = shell_examples()
    assert len(lines) >= 8 and all(line.startswith("lamina ") for line in lines)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("import requests\n")
    env = {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "LAMINA_DATA_DIR": str(tmp_path / "data"),
    }

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    memory_id = ""
    for line in lines:
        command = line.split("  #", 1)[0].strip()
        if "<id>" in command:
            assert memory_id, "an example uses <id> before any memory exists"
            command = command.replace("<id>", shlex.quote(memory_id))
        result = run(command)
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        if command.startswith("lamina memory add") and not memory_id:
            listed = run("lamina memory list --user-id alice --json")
            memory_id = json.loads(listed.stdout)["items"][0]["id"]
    searched = run("lamina memory search 'editor theme' --user-id alice --mode hybrid --json")
    assert "Prefers dark mode in every editor" in searched.stdout
