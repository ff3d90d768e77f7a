"""Every example of docs/integrations.md runs as written, as a script in a fresh directory,
against the fake OpenAI-compatible server (LLM_BASE_URL)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"
_EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\s*```python\n(.*?)\n```", re.S)


def examples() -> dict[str, str]:
    return dict(_EXAMPLE.findall(DOC.read_text(encoding="utf-8")))


EXPECTED = {
    "langgraph": ["Bob lives in Lisbon"],
    "openai-agents": ["echo: I moved to Porto last week", "2 items kept in lamina"],
    "langchain": ["['My printer jams', 'Which model is it?']", "LaserJet 4000 user"],
    "pydantic-ai": ["echo: Remember that I prefer window seats"],
}


def test_every_adapter_has_an_example() -> None:
    assert set(examples()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_example_runs(name: str, tmp_path: Path) -> None:
    script = tmp_path / f"example_{name.replace('-', '_')}.py"
    script.write_text(examples()[name], encoding="utf-8")
    with FakeOpenAI() as llm:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")},
                "LLM_BASE_URL": llm.base_url,
                "HOME": str(tmp_path),
            },
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    for line in EXPECTED[name]:
        assert line in done.stdout, (done.stdout, done.stderr)
    assert (tmp_path / "memdata").is_dir()
