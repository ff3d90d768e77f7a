"""ms.knowledge as a whole (knowledge/service.py): a service of parts whose public calls are
the parts' own methods, blocking through the facade."""

from __future__ import annotations

from pathlib import Path

from lamina import AsyncLamina, Lamina
from lamina.knowledge.service import KnowledgeService
from tests.conftest import fast_settings
from tests.delegates import delegated_calls

PARTS = {"repository", "writer", "items", "lifecycle", "reads", "searches", "promotions"}
HOOKS = {"git", "index", "guard", "secret_guard"}


def test_each_public_call_is_the_method_of_one_part(data_dir: Path) -> None:
    service = AsyncLamina(fast_settings(data_dir)).knowledge
    delegated = delegated_calls(service)
    assert len(delegated) == 18
    assert {n for n in dir(KnowledgeService) if not n.startswith("_")} == {*delegated, *HOOKS}
    assert {n for n in vars(service) if not n.startswith("_")} == PARTS
    assert service.create == service.items.create and service.check == service.repository.check
    assert service.guard is service.writer.guard and service.git is service.repository.git


def test_the_blocking_facade_runs_the_delegated_calls(ms: Lamina) -> None:
    change = ms.knowledge.create("adr", "Use PostgreSQL", layer="company", summary="s")
    item = ms.knowledge.get(change.item.id)
    assert item.title == "Use PostgreSQL" and item.summary == "s"
    moved = ms.knowledge.set_status(change.item.id, "proposed")
    assert moved.item.status.value == "proposed"
    assert [i.id for i in ms.knowledge.list(status="any").items] == [change.item.id]
    assert ms.knowledge.tenant(None) == "default" and ms.knowledge.head() == moved.commit
