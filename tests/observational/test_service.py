"""ms.sessions as a whole (observational/service.py): a service of parts whose public calls
are the parts' own methods, blocking through the facade."""

from __future__ import annotations

from pathlib import Path

from lamina import AsyncLamina, Lamina
from lamina.observational.service import SessionService
from tests.conftest import fast_settings
from tests.delegates import delegated_calls

HOOKS = {"settings", "buffer", "graph_buffer", "graph_enabled"}


def test_each_public_call_is_the_method_of_one_part(data_dir: Path) -> None:
    service = AsyncLamina(fast_settings(data_dir)).sessions
    delegated = delegated_calls(service)
    assert len(delegated) == 27
    assert {n for n in dir(SessionService) if not n.startswith("_")} == {*delegated, *HOOKS}
    assert {n for n in vars(service) if not n.startswith("_")} == {"core", "records", "runs"}
    assert {d.part for d in delegated.values()} == {"records", "runs"}
    assert service.append == service.records.append and service.flush == service.runs.flush
    assert service.buffer is service.runs.buffer
    assert service.settings is service.core.settings
    changed = service.settings.model_copy(update={"enabled": False})
    service.settings = changed
    assert service.core.settings is changed


def test_the_blocking_facade_runs_the_delegated_calls(ms: Lamina) -> None:
    first = ms.sessions.append("s1", "user", "hello")
    ms.sessions.append_many("s1", [{"role": "assistant", "content": "hi"}])
    assert [m.content for m in ms.sessions.messages("s1")] == ["hello", "hi"]
    assert first.index == 0 and ms.sessions.list_sessions() == [("s1", 2)]
    ms.sessions.set_system_prompt("s1", "be brief")
    assert ms.sessions.system_prompt("s1") == "be brief"
    assert ms.sessions.dropped_count() == 0
    assert ms.sessions.delete_messages("s1") == 2
