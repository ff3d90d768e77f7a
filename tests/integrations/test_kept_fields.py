"""What a framework adapter keeps beside a session message (a tool call marked ``kept``) is
given back to the framework and to nobody else: the observer does not read it, the token
count leaves it out, the context-aware model does not send it, the CLI does not print it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from lamina import ErrorCode, Lamina, LaminaError
from lamina.context.turns import from_records
from lamina.integrations.langchain import LaminaChatMessageHistory
from lamina.integrations.openai_agents import LaminaSession
from tests.cli.runner import run
from tests.conftest import fast_settings
from tests.fakes.openai_server import FakeOpenAI

METADATA = {"model_name": "gpt-secret-sauce", "system_fingerprint": "fp_0xFEED"}


def conversation() -> list[Any]:
    return [
        HumanMessage("Our staging cluster lags behind", id="h-1", name="alice"),
        AIMessage("Checking the WAL senders", id="run-1", response_metadata=METADATA),
        AIMessage("", id="run-2", response_metadata=METADATA),
    ]


def test_the_observer_reads_the_text_only(data_dir: Path) -> None:
    with FakeOpenAI() as llm:
        llm.reply = lambda body: "OBSERVATION: the user fights replication lag."
        settings = fast_settings(
            data_dir,
            llm={"model": "fake", "base_url": llm.base_url, "max_retries": 0},
            observational_memory={"enabled": True, "message_token_threshold": 100_000},
        )
        with Lamina(settings) as ms:
            LaminaChatMessageHistory("kept:1", ms).add_messages(conversation())
            ms.sessions.observe("kept:1")
            sent = llm.chat_requests[-1]["messages"][-1]["content"]
    assert "Our staging cluster lags behind" in sent and "Checking the WAL senders" in sent
    assert "gpt-secret-sauce" not in sent and "langchain.message" not in sent
    assert "[assistant]: \n" not in sent + "\n"  # the empty message says nothing


def test_nothing_said_is_not_observed(data_dir: Path) -> None:
    with FakeOpenAI() as llm:
        settings = fast_settings(
            data_dir,
            llm={"model": "fake", "base_url": llm.base_url, "max_retries": 0},
            observational_memory={"enabled": True, "message_token_threshold": 100_000},
        )
        with Lamina(settings) as ms:
            session = LaminaSession("kept:4", ms)
            reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}
            ms._run(session.add_items([reasoning]))
            assert ms.sessions.observe("kept:4") is None
            assert llm.chat_requests == [] and ms.sessions.observations("kept:4") == []
            ms._run(session.add_items([{"role": "user", "content": "I moved to Porto"}]))
            note = ms.sessions.observe("kept:4")
            assert note is not None and (note.source_start, note.source_end) == (0, 1)
            assert len(llm.chat_requests) == 1
            assert "encrypted_content" not in llm.chat_requests[0]["messages"][-1]["content"]


def test_token_counts_the_context_model_and_the_cli_leave_it_out(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        LaminaChatMessageHistory("kept:2", ms).add_messages(conversation())
        stored = ms.sessions.messages("kept:2")
        plain = ms.sessions.append("plain", "assistant", "Checking the WAL senders")
        assert stored[1].token_count == plain.token_count
        assert any(c.get("kept") for c in stored[1].tool_calls)
        chat = from_records(stored)
        assert [m.content for m in chat] == [
            "Our staging cluster lags behind",
            "Checking the WAL senders",
        ]
        # An item kept whole by the Agents SDK session (reasoning) is not sent either.
        session = LaminaSession("kept:3", ms)
        ms._run(session.add_items([{"type": "reasoning", "id": "rs_1", "summary": []}]))
        assert from_records(ms.sessions.messages("kept:3")) == []
        # A user's text beside a picture is the user's, for the observer and the model.
        picture = {"type": "input_image", "image_url": "data:image/png;base64,iVB"}
        content = [{"type": "input_text", "text": "what is this?"}, picture]
        ms._run(session.add_items([{"role": "user", "content": content}]))
        last = ms.sessions.messages("kept:3")[-1]
        assert (last.role, last.content) == ("user", "what is this?")
        assert ms._run(session.get_items(limit=1)) == [{"role": "user", "content": content}]
        for bad in ("yes", 1):
            with pytest.raises(LaminaError) as err:
                ms.sessions.append("x", "user", "hi", tool_calls=[{"name": "n", "kept": bad}])
            assert err.value.code is ErrorCode.INVALID_ARGUMENT
    code, out, _ = run(capsys, data_dir, "session", "show", "kept:2")
    assert code == 0 and "Checking the WAL senders" in out
    assert "gpt-secret-sauce" not in out and "langchain.message" not in out
