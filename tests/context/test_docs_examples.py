"""Every Python example of docs/context.md runs as written, as a script in a fresh directory,
against the fake OpenAI-compatible server (LLM_BASE_URL); what it prints is what the page
says it prints, and what the fake model received is what the page says it receives."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.docs_examples import python_examples, run_example
from tests.fakes.openai_server import FakeOpenAI, Reply

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "context.md"
_OUTPUT = re.compile(r"<!-- output: ([\w-]+) -->\s*```\n(.*?)\n```", re.S)
_BLOCK = re.compile(r"^```python$", re.M)


def examples() -> dict[str, str]:
    return python_examples(DOC)


def outputs() -> dict[str, str]:
    return dict(_OUTPUT.findall(DOC.read_text(encoding="utf-8")))


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return str(first["content"]) if first["role"] == "system" else ""


def check_context_model(server: FakeOpenAI) -> None:
    first, follow_up = server.chat_requests
    base = "You are the on-call assistant.\n\n## Runtime Context\n- Session: slack:T1:C2 | "
    assert system_of(first).startswith(base + "Channel: slack | Tools: 1 |")
    # The follow-up: the base prompt kept, the runtime context, the conversation so far.
    assert system_of(follow_up).startswith(base + "Channel: slack | Tools: 1 |")
    assert [m["content"] for m in follow_up["messages"][1:]] == [
        "why is replication lagging?",
        "echo: why is replication lagging?",
        "why?",
    ]


def weather_agent(body: dict[str, Any]) -> str | Reply:
    """Calls get_weather once, then answers from its result."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return f"In {json.loads(last['content'])['city']} it is sunny."
    return Reply(calls=[("get_weather", {"city": "Paris"})])


def check_agent_loop(server: FakeOpenAI) -> None:
    ask, result = server.chat_requests
    assert ask["tools"][0]["function"]["name"] == "get_weather" and ask["tool_choice"] == "auto"
    assert result["stream"] is True
    # The tool result went out with the base prompt and the whole turn.
    assert system_of(result) == "You are a travel agent."
    assert [m["role"] for m in result["messages"]] == ["system", "user", "assistant", "tool"]


#: Per example: what the fake model answers (None: it echoes), what the script prints when
#: the page shows no output, and what to check of the requests it received.
SCENARIOS: dict[
    str,
    tuple[Callable[[dict[str, Any]], str | Reply] | None, str | None, Callable[..., None] | None],
] = {
    "stores": (None, None, None),
    "retrieval": (None, None, None),
    "tools-runtime": (None, None, None),
    "build-prompt": (None, None, None),
    "context-model": (None, None, check_context_model),
    "agent-loop": (
        weather_agent,
        "In Paris it is sunny.\n['user', 'assistant', 'tool', 'assistant']",
        check_agent_loop,
    ),
    "agent-tools": (None, "['The team works in CET']", None),
}


def test_every_python_example_is_marked_and_run() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(_BLOCK.findall(text)) == len(examples()) == len(SCENARIOS)
    assert set(examples()) == set(SCENARIOS)
    assert set(outputs()) <= set(SCENARIOS)
    for name, (_, printed, _) in SCENARIOS.items():
        assert (name in outputs()) != (printed is not None), name


def test_the_command_line_example_runs(tmp_path: Path) -> None:
    [commands] = re.findall(
        r"<!-- example: cli -->\s*```sh\n(.*?)\n```", DOC.read_text(encoding="utf-8"), re.S
    )
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(
        ["bash", "-e", "-c", commands],
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The last command: the prompt for the question, with the rule saved first.
    assert done.stdout.endswith(
        "You are the release bot.\n\n## User Knowledge\n"
        "- [rule] deploy-day: Deployments happen on Tuesdays\n"
    ), done.stdout


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_example_runs_as_written(name: str, tmp_path: Path) -> None:
    reply, printed, check = SCENARIOS[name]
    with FakeOpenAI() as llm:
        if reply is not None:
            llm.reply = reply
        done = run_example(name, examples()[name], tmp_path, llm.base_url)
    assert done.returncode == 0, done.stderr
    expected = outputs()[name] if printed is None else printed
    assert done.stdout == expected + "\n", (done.stdout, done.stderr)
    if check is not None:
        check(llm)
    assert (tmp_path / "memdata").is_dir()
