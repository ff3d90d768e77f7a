from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from lamina import ErrorCode, Lamina, LaminaError, MemoryLayer
from tests.conftest import fast_settings, openai_settings
from tests.fakes.openai_server import FakeOpenAI

ALL_IDS = dict(
    agent_id="bot",
    user_id="alice",
    session_id="s1",
    project_id="atlas",
    team_id="platform",
    org_id="eng",
    company_id="acme",
)


def test_quickstart(ms: Lamina) -> None:
    m = ms.memory.add(
        "Prefers dark mode in every editor",
        layer="user",
        user_id="alice",
        metadata={"tags": ["ui"]},
    )
    assert m.id and m.tenant_id == "default" and m.layer is MemoryLayer.USER
    assert m.metadata == {"tags": ["ui"]} and m.tags == ["ui"] and m.embedding_generated
    hits = ms.memory.search("editor theme", user_id="alice", threshold=0.3)
    assert hits[0].memory.content == "Prefers dark mode in every editor"
    assert hits[0].memory.layer is MemoryLayer.USER and 0.3 <= hits[0].score <= 1.0


def test_ids_are_unique(ms: Lamina) -> None:
    ids = {ms.memory.add("same content", layer="user", user_id="u").id for _ in range(5)}
    assert len(ids) == 5


@pytest.mark.parametrize(
    ("layer", "given", "missing"),
    [
        ("agent", {"user_id": "u"}, "agent_id"),
        ("agent", {"agent_id": "a"}, "user_id"),
        ("user", {}, "user_id"),
        ("session", {"user_id": "u"}, "session_id"),
        ("project", {"user_id": "u"}, "project_id"),
        ("team", {}, "team_id"),
        ("org", {}, "org_id"),
        ("company", {}, "company_id"),
    ],
)
def test_add_missing_identifier_names_it(
    ms: Lamina, layer: str, given: dict[str, str], missing: str
) -> None:
    with pytest.raises(LaminaError) as err:
        ms.memory.add("content", layer=layer, **given)
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER
    assert err.value.details["identifier"] == missing and missing in err.value.message


def test_user_and_project_reach_five_layers_not_agent_or_session(ms: Lamina) -> None:
    topics = [
        "wiki pages",
        "runbooks",
        "release notes",
        "on-call rota",
        "CI pipeline",
        "staging servers",
        "rollback plan",
    ]
    for layer, topic in zip(MemoryLayer, topics, strict=True):
        ms.memory.add(f"The deploy checklist mentions the {topic}", layer=layer, **ALL_IDS)
    ms.memory.register_hierarchy(
        project_id="atlas", team_id="platform", org_id="eng", company_id="acme"
    )
    hits = ms.memory.search("deploy checklist", user_id="alice", project_id="atlas", threshold=0.0)
    assert [h.memory.layer.value for h in hits] == ["user", "project", "team", "org", "company"]
    everything = ms.memory.search("deploy checklist", threshold=0.0, **ALL_IDS)
    assert [h.memory.layer for h in everything] == list(MemoryLayer)


def test_precedence_before_score_and_layers_filter(ms: Lamina) -> None:
    ms.memory.add("Use PostgreSQL for every new service", layer="company", company_id="default")
    ms.memory.add(
        "Databases are chosen per project by the architects", layer="project", project_id="p"
    )
    hits = ms.memory.search("Use PostgreSQL for every new service", project_id="p", threshold=0.0)
    assert [h.memory.layer.value for h in hits] == ["project", "company"]
    assert hits[1].score > hits[0].score  # company matches better, project still comes first
    only = ms.memory.search("PostgreSQL", project_id="p", layers=["company"], threshold=0.0)
    assert [h.memory.layer.value for h in only] == ["company"]
    with pytest.raises(LaminaError) as err:
        ms.memory.search("PostgreSQL", project_id="p", layers=["session"])
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER


def test_near_duplicates_keep_the_most_specific_layer(ms: Lamina) -> None:
    ms.memory.add("Code reviews need two approvals", layer="company", company_id="default")
    user = ms.memory.add("Code reviews need two approvals.", layer="user", user_id="u")
    ms.memory.add("Lunch is at noon", layer="user", user_id="u")
    hits = ms.memory.search("code review approvals", user_id="u", project_id="p", threshold=0.3)
    assert [h.memory.id for h in hits] == [user.id]


def test_default_threshold_and_limit(ms: Lamina) -> None:
    ms.memory.bulk_add(
        [
            {
                "content": f"I enjoy hiking in the mountains, trip {i}",
                "layer": "user",
                "user_id": "u",
            }
            for i in range(15)
        ]
    )
    ms.memory.add("Invoices are sent on the first of the month", layer="user", user_id="u")
    hits = ms.memory.search("I enjoy hiking in the mountains", user_id="u")
    assert len(hits) == 10 and all(h.score >= 0.7 for h in hits)
    everything = ms.memory.search(
        "I enjoy hiking in the mountains", user_id="u", threshold=-1.0, limit=50
    )
    assert any("Invoices" in h.memory.content for h in everything)
    assert ms.memory.search("quantum chromodynamics lecture", user_id="u") == []


def test_modes_and_filters_through_the_service(ms: Lamina) -> None:
    ms.memory.add(
        "Deploys happen on Friday",
        layer="user",
        user_id="u",
        metadata={"tags": ["ops"], "priority": 3},
    )
    ms.memory.add(
        "Deploys are frozen in December",
        layer="user",
        user_id="u",
        metadata={"tags": ["ops", "calendar"], "priority": 1},
    )
    for mode in ("semantic", "keyword", "hybrid"):
        hits = ms.memory.search(
            "deploys", user_id="u", mode=mode, threshold=0.0, filters={"priority": {"gte": 2}}
        )
        assert [h.memory.content for h in hits] == ["Deploys happen on Friday"], mode
        tagged = ms.memory.search(
            "deploys", user_id="u", mode=mode, threshold=0.0, tags=["calendar"]
        )
        assert [h.memory.content for h in tagged] == ["Deploys are frozen in December"], mode
    assert ms.memory.search("the a of", user_id="u", mode="keyword") == []


def test_update_reembeds_only_new_content(tmp_path: Path) -> None:
    with FakeOpenAI() as server, Lamina(openai_settings(tmp_path / "d", server)) as ms:
        m = ms.memory.add("original text", layer="user", user_id="u")
        before = len(server.embedded)
        meta = ms.memory.update(m.id, metadata={"k": "v"})
        assert len(server.embedded) == before and meta.metadata == {"k": "v"}
        assert meta.updated_at > m.updated_at and meta.content == "original text"
        changed = ms.memory.update(m.id, content="rewritten text", metadata={"k": None})
        assert server.embedded[-1] == "rewritten text" and changed.metadata == {}
        assert changed.updated_at > meta.updated_at
        hits = ms.memory.search("rewritten text", user_id="u", threshold=0.99)
        assert [h.memory.id for h in hits] == [m.id]


def test_metadata_only_update_keeps_the_stored_vector(ms: Lamina, data_dir: Path) -> None:
    m = ms.memory.add("vector stays", layer="user", user_id="u")
    path = data_dir / "lamina.db"

    def blob() -> bytes:
        with sqlite3.connect(path) as conn:
            return bytes(
                conn.execute("SELECT embedding FROM memories WHERE id = ?", (m.id,)).fetchone()[0]
            )

    before = blob()
    ms.memory.update(m.id, metadata={"x": 1})
    assert blob() == before


def test_update_errors(ms: Lamina) -> None:
    for kwargs in ({"content": "x"}, {"metadata": {"a": 1}}):
        with pytest.raises(LaminaError) as err:
            ms.memory.update("missing-id", **kwargs)  # type: ignore[arg-type]
        assert err.value.code is ErrorCode.MEMORY_NOT_FOUND
    m = ms.memory.add("x", layer="user", user_id="u")
    with pytest.raises(LaminaError) as err:
        ms.memory.update(m.id)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_delete_is_idempotent_and_history_survives(ms: Lamina) -> None:
    m = ms.memory.add("first", layer="user", user_id="u", actor="ann")
    ms.memory.update(m.id, content="second", actor="bob")
    first = ms.memory.delete(m.id, actor="cy")
    again = ms.memory.delete(m.id)
    assert first.success and first.existed and again.success and not again.existed
    assert ms.memory.get(m.id) is None
    events = ms.memory.history(m.id)
    assert [(e.operation.value, e.actor, e.old_content, e.new_content) for e in events] == [
        ("add", "ann", None, "first"),
        ("update", "bob", "first", "second"),
        ("delete", "cy", "second", None),
    ]
    with pytest.raises(LaminaError) as err:
        ms.memory.history("never-existed")
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND


def test_list_pagination_and_filters(ms: Lamina) -> None:
    for i in range(12):
        ms.memory.add(f"note {i}", layer="user", user_id="u", metadata={"i": i})
    ms.memory.add("project note", layer="project", project_id="p")
    page = ms.memory.list(user_id="u", limit=5)
    assert len(page.items) == 5 and page.total_count == 12 and page.next_cursor
    assert [m.content for m in page.items] == [f"note {i}" for i in range(11, 6, -1)]
    rest = ms.memory.list(user_id="u", limit=50, cursor=page.next_cursor)
    assert len(rest.items) == 7 and rest.next_cursor is None
    both = ms.memory.list(user_id="u", project_id="p", layers=["user", "project"], limit=50)
    assert both.total_count == 13
    filtered = ms.memory.list(user_id="u", filters={"i": {"in": [1, 2, 99]}})
    assert sorted(m.content for m in filtered.items) == ["note 1", "note 2"]


def test_tenants_never_see_each_other(ms: Lamina) -> None:
    a = ms.memory.add("tenant A secret plan", layer="user", user_id="u", tenant_id="A")
    assert ms.memory.get(a.id, tenant_id="B") is None
    assert ms.memory.search("secret plan", user_id="u", tenant_id="B", threshold=0.0) == []
    assert ms.memory.search("secret", user_id="u", tenant_id="B", mode="keyword") == []
    assert ms.memory.list(user_id="u", tenant_id="B").total_count == 0
    with pytest.raises(LaminaError) as err:
        ms.memory.update(a.id, content="hijacked", tenant_id="B")
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND
    assert ms.memory.delete(a.id, tenant_id="B").existed is False
    with pytest.raises(LaminaError):
        ms.memory.history(a.id, tenant_id="B")
    assert ms.memory.get(a.id, tenant_id="A") == a
    assert ms.memory.get(a.id) is None  # the default tenant is "default"


def test_bulk_add_validates_everything_first(ms: Lamina) -> None:
    with pytest.raises(LaminaError) as err:
        ms.memory.bulk_add(
            [
                {"content": "ok", "layer": "user", "user_id": "u"},
                {"content": "bad", "layer": "user"},
            ]
        )
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER
    with pytest.raises(LaminaError) as err:
        ms.memory.bulk_add([{"content": "ok", "layer": "user", "user_id": "u", "bogus": 1}])
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert ms.memory.list(user_id="u").total_count == 0
    assert ms.memory.bulk_add([]) == []
    assert ms.memory.bulk_delete([]) == 0


def test_async_api_mirrors_sync(data_dir: Path) -> None:
    import asyncio

    from lamina import AsyncLamina

    async def main() -> None:
        async with AsyncLamina(fast_settings(data_dir)) as ams:
            m = await ams.memory.add("async memory", layer="user", user_id="u")
            hits = await ams.memory.search("async memory", user_id="u")
            assert [h.memory.id for h in hits] == [m.id]
            assert (await ams.health())["healthy"]

    asyncio.run(main())
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.memory.list(user_id="u").total_count == 1


def test_sync_facade_is_thread_safe(ms: Lamina) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                ms.memory.add(f"thread {n} item {i}", layer="user", user_id="u")
                ms.memory.search(f"thread {n}", user_id="u", threshold=0.0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert ms.memory.list(user_id="u").total_count == 40
