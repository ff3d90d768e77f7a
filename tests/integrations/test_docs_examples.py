"""Every example of docs/integrations.md runs as written, as a script in a fresh directory,
against the fake OpenAI-compatible server (LLM_BASE_URL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_examples import python_examples, run_example
from tests.fakes.openai_server import FakeOpenAI

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"


def examples() -> dict[str, str]:
    return python_examples(DOC)


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
    with FakeOpenAI() as llm:
        done = run_example(name, examples()[name], tmp_path, llm.base_url)
    assert done.returncode == 0, done.stderr
    for line in EXPECTED[name]:
        assert line in done.stdout, (done.stdout, done.stderr)
    assert (tmp_path / "memdata").is_dir()
