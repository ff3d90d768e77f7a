"""The read path (memory/reads.py): search precedence, dedup, thresholds, modes, filters, list."""

from __future__ import annotations

import asyncio

import pytest

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError


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
    # collapse=False keeps every one of them, still in precedence order.
    every = ms.memory.search(
        "code review approvals", user_id="u", project_id="p", threshold=0.3, collapse=False
    )
    assert [h.memory.layer.value for h in every] == ["user", "company"]
    assert every[0].memory.id == user.id
    same = [
        ms.memory.add("Code reviews need two approvals", layer="user", user_id="v", dedup=False)
    ]
    same.append(
        ms.memory.add("Code reviews need two approvals", layer="user", user_id="v", dedup=False)
    )
    found = ms.memory.search("code reviews", user_id="v", threshold=0.3, collapse=False)
    assert {h.memory.id for h in found} == {m.id for m in same}
    with pytest.raises(LaminaError) as err:
        ms.memory.search("code reviews", user_id="v", collapse="no")  # type: ignore[arg-type]
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


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
        "I enjoy hiking in the mountains", user_id="u", threshold=0.0, limit=50
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


def test_identifier_keywords_are_checked_before_anything_runs(ms: Lamina) -> None:
    """The identifier keywords every call shares (lamina.memory.layers.IdentifierArgs):
    the ones given reach the scope, an unknown one is a TypeError and stores nothing."""
    ms.memory.add("likes tea", layer="user", user_id="u1")
    with pytest.raises(TypeError, match="'usr_id'"):
        ms.memory.add("likes coffee", layer="user", usr_id="u1")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"search\(\) got an unexpected keyword argument"):
        ms.memory.search("tea", user_id="u1", project="p")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'group_id'"):
        ms.memory.list(group_id="g")  # type: ignore[call-arg]
    page = ms.memory.list(user_id="u1")
    assert [m.content for m in page.items] == ["likes tea"]
    assert ms.memory.resolve_identifiers(user_id="u1")["identifiers"] == {"user_id": "u1"}
    assert [h.memory.content for h in ms.memory.search("tea", user_id="u1")] == ["likes tea"]


@pytest.mark.parametrize("bad", [2, -1, 1.0001, float("nan"), float("inf"), "0.5", True])
def test_a_threshold_outside_zero_to_one_is_refused(ms: Lamina, bad: object) -> None:
    """docs/search.md: a score threshold is in [0, 1]; memory search (sync and async),
    the context layers' and knowledge search's ``min_score`` refuse anything else."""
    kept = ms.memory.add("Alice prefers aisle seats", layer="user", user_id="alice")
    ms.context.skills.save("release", "Cut a release: tag, build, sign, publish")
    calls = {
        "threshold": lambda: ms.memory.search("aisle seats", user_id="alice", threshold=bad),
        "min_score": lambda: ms.context.skills.search("release", min_score=bad),
    }
    knowledge = lambda: ms.knowledge.search("release", min_score=bad)  # noqa: E731
    for field, call in [*calls.items(), ("min_score", knowledge)]:
        with pytest.raises(LaminaError) as err:
            call()
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
        assert err.value.details["field"] == field
        if isinstance(bad, float) and bad == bad:  # a number out of range says the range
            assert err.value.message == f"{field} must be from 0 to 1, not {bad:g}"

    async def run() -> None:
        async with AsyncLamina(ms.settings) as ams:
            with pytest.raises(LaminaError) as err:
                await ams.memory.search("aisle seats", user_id="alice", threshold=bad)
            assert err.value.code is ErrorCode.INVALID_ARGUMENT

    asyncio.run(run())
    # Both ends are in: everything, and only a perfect match.
    assert [h.memory.id for h in ms.memory.search("aisle", user_id="alice", threshold=0)] == [
        kept.id
    ]
    assert ms.memory.search("aisle seats", user_id="alice", threshold=1).below_threshold == 1
    assert ms.memory.get(kept.id).content == kept.content
