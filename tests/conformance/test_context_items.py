"""The context-item contract (lamina.context.ports, over lamina.memory.items), the same on
every store."""

from __future__ import annotations

from typing import Any

import pytest

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.items import ItemKind, ItemQuery, NewContextRecord
from lamina.memory.models import SearchMode
from lamina.text import analyze
from tests.conformance.conftest import Harness

K = ItemKind.KNOWLEDGE


def put(
    h: Harness,
    key: str,
    text: str,
    *,
    versioned: bool = True,
    tenant: str = "t1",
    kind: ItemKind = K,
    category: str | None = "fact",
    tags: list[str] | None = None,
    data: dict[str, Any] | None = None,
) -> Any:
    vector = h.embedder.embed_sync([text])[0]
    return h.run(
        h.store.context_items.put_item(
            NewContextRecord(
                tenant, kind, key, category, text, data or {"n": 1}, tags or [], vector
            ),
            versioned=versioned,
        )
    )


def search(
    h: Harness,
    text: str,
    mode: SearchMode,
    *,
    tenant: str = "t1",
    limit: int = 5,
    kind: ItemKind = K,
    **kw: Any,
) -> list[tuple[Any, float]]:
    vector = h.embedder.embed_sync([text])[0]
    query = ItemQuery(tenant, kind, text, tuple(analyze(text)), vector, mode, limit, **kw)
    result: list[tuple[Any, float]] = h.run(h.store.context_items.search_items(query))
    return result


def test_versions_keep_history_and_only_the_latest_is_live(harness: Harness) -> None:
    h = harness
    first = put(h, "deploy", "We deploy on Tuesdays")
    second = put(h, "deploy", "We deploy on Tuesdays and Thursdays")
    assert (first.version, second.version) == (1, 2) and first.id != second.id
    items = h.store.context_items
    latest = h.run(items.get_item("t1", K, "deploy"))
    assert [r.version for r in latest] == [2] and latest[0].is_latest
    every = h.run(items.get_item("t1", K, "deploy", all_versions=True))
    assert [(r.version, r.is_latest) for r in every] == [(2, True), (1, False)]
    assert every[1].content == "We deploy on Tuesdays"
    # An old version's id finds the item too.
    assert h.run(items.get_item("t1", K, first.id))[0].version == 2
    page, cursor, total = h.run(
        items.list_items("t1", K, category=None, tags=[], limit=10, cursor=None)
    )
    assert total == 1 and cursor is None and [r.version for r in page] == [2]
    for mode in SearchMode:
        hits = search(h, "deploy Tuesdays Thursdays", mode)
        assert [r.version for r, _ in hits] == [2], mode


def test_in_place_saves_bump_the_version_without_keeping_old_rows(harness: Harness) -> None:
    h = harness
    put(h, "release", "Tag, build, publish", versioned=False, kind=ItemKind.SKILL)
    again = put(h, "release", "Tag, build, sign, publish", versioned=False, kind=ItemKind.SKILL)
    assert again.version == 2
    rows = h.run(h.store.context_items.get_item("t1", ItemKind.SKILL, "release", all_versions=True))
    assert [r.content for r in rows] == ["Tag, build, sign, publish"]
    assert search(h, "sign publish", SearchMode.KEYWORD, kind=ItemKind.SKILL)[0][0].version == 2


def test_search_modes_filters_and_scores(harness: Harness) -> None:
    h = harness
    put(h, "db", "The production database is PostgreSQL 16", category="fact", tags=["infra"])
    put(
        h,
        "tz",
        "The user lives in Berlin and works in CET",
        category="preference",
        tags=["personal"],
    )
    put(
        h,
        "lint",
        "Always run ruff before committing Python code",
        category="rule",
        tags=["infra", "python"],
    )
    for mode in SearchMode:
        hits = search(h, "which database runs in production", mode)
        assert hits[0][0].key == "db", mode
        assert all(0.0 <= s <= 1.0 for _, s in hits)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert [r.key for r, _ in search(h, "database", SearchMode.HYBRID, category="rule")] == ["lint"]
    tagged = {
        r.key for r, _ in search(h, "database ruff Berlin", SearchMode.HYBRID, tags=("infra",))
    }
    assert tagged == {"db", "lint"}
    assert search(h, "zebra", SearchMode.KEYWORD) == []
    assert len(search(h, "anything at all", SearchMode.SEMANTIC, limit=2)) == 2


def test_pages_delete_and_modify(harness: Harness) -> None:
    h = harness
    for i in range(7):
        put(
            h,
            f"k{i}",
            f"fact number {i}",
            category="fact" if i % 2 else "rule",
            tags=["even"] if i % 2 == 0 else [],
        )
    items = h.store.context_items
    seen, cursor = [], None
    while True:
        page, cursor, total = h.run(
            items.list_items("t1", K, category=None, tags=[], limit=3, cursor=cursor)
        )
        assert total == 7
        seen += [r.key for r in page]
        if cursor is None:
            break
    assert seen == [f"k{i}" for i in range(7)]
    _, _, rules = h.run(items.list_items("t1", K, category="rule", tags=[], limit=10, cursor=None))
    _, _, even = h.run(
        items.list_items("t1", K, category=None, tags=["even"], limit=10, cursor=None)
    )
    assert (rules, even) == (4, 4)
    with pytest.raises(LaminaError) as err:
        h.run(items.list_items("t1", K, category=None, tags=[], limit=3, cursor="garbage"))
    assert err.value.code is ErrorCode.INVALID_ARGUMENT

    changed = h.run(
        items.modify_items("t1", K, ["k1", "k2", "nope"], lambda _key, d: {**d, "n": d["n"] + 1})
    )
    assert sorted(r.key for r in changed) == ["k1", "k2"]
    assert h.run(items.get_item("t1", K, "k1"))[0].data == {"n": 2}

    put(h, "k3", "fact number 3, revised")
    assert h.run(items.delete_item("t1", K, "k3")) == 2  # both versions
    assert h.run(items.get_item("t1", K, "k3")) == []
    assert h.run(items.delete_item("t1", K, "k3")) == 0
    assert all(r.key != "k3" for r, _ in search(h, "fact number 3", SearchMode.HYBRID))


def test_tenants_and_kinds_never_mix(harness: Harness) -> None:
    h = harness
    put(h, "secret", "The launch code is swordfish", tenant="t1")
    put(h, "secret", "The launch code is marlin", tenant="t2")
    put(h, "secret", "swordfish skill", tenant="t1", kind=ItemKind.SKILL, versioned=False)
    items = h.store.context_items
    assert h.run(items.get_item("t2", K, "secret"))[0].content.endswith("marlin")
    for mode in SearchMode:
        found = search(h, "launch code swordfish", mode, tenant="t2")
        assert [r.content for r, _ in found] == ["The launch code is marlin"], mode
        assert all(r.kind is K for r, _ in search(h, "swordfish", mode))
    assert h.run(items.delete_item("t2", K, "secret")) == 1
    assert h.run(items.get_item("t1", K, "secret"))[0].content.endswith("swordfish")


def test_a_second_store_sees_the_first_ones_writes(harness: Harness) -> None:
    h = harness
    other = h.reopen()
    put(h, "a", "alpha centauri is a star system")
    assert search(h, "alpha centauri", SearchMode.HYBRID)  # loads the first one's index
    vector = h.embedder.embed_sync(["beta pictoris has a debris disk"])[0]
    h.run(
        other.context_items.put_item(
            NewContextRecord(
                "t1", K, "b", "fact", "beta pictoris has a debris disk", {}, [], vector
            ),
            versioned=True,
        )
    )
    assert search(h, "beta pictoris debris disk", SearchMode.HYBRID)[0][0].key == "b"
    h.run(other.context_items.delete_item("t1", K, "a"))
    assert all(r.key != "a" for r, _ in search(h, "alpha centauri", SearchMode.HYBRID))
