"""No write through the LangGraph store is lost: every (namespace, key) holds its own item,
whatever text other keys, namespaces or plain memories hold; an overwrite leaves one memory;
a delete leaves none. And where lamina deliberately differs from LangGraph, a clear error with
its ErrorCode, nothing stored. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError
from lamina.integrations.langgraph import LaminaStore
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

TEXT = "The deploy window is Tuesday at 10:00"
N = 1000


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Any]:
    extra: dict[str, Any] = {}
    if request.param == "postgres":
        url = require_postgres()
        empty_database(url)
        extra["database_url"] = url
    yield fast_settings(data_dir, **extra)


def rows(ms: Lamina, **ids: str) -> list[str]:
    """The memories' contents of a scope, as lamina itself lists them."""
    return [m.content for m in ms.memory.list(limit=1000, **ids).items]  # type: ignore[arg-type]


def test_the_same_text_under_other_keys_is_stored_every_time(settings: Any) -> None:
    with Lamina(settings) as ms:
        ms.memory.add(TEXT, layer="user", user_id="alice")  # a plain memory, same text
        store = LaminaStore(ms)
        ns = ("user", "alice", "notes")
        store.put(ns, "t1", {"content": TEXT})
        store.put(ns, "t2", {"content": TEXT})  # another key
        store.put(("user", "alice", "other"), "t1", {"content": TEXT})  # another namespace
        for namespace, key in [(ns, "t1"), (ns, "t2"), (("user", "alice", "other"), "t1")]:
            item = store.get(namespace, key)
            assert item is not None and item.value == {"content": TEXT}
        assert rows(ms, user_id="alice") == [TEXT] * 4

        # Overwrite: one memory for the key, the new value; delete: none.
        store.put(ns, "t1", {"content": "moved to Wednesday"})
        assert sorted(rows(ms, user_id="alice")) == sorted([TEXT] * 3 + ["moved to Wednesday"])
        store.delete(ns, "t1")
        assert store.get(ns, "t1") is None
        assert rows(ms, user_id="alice") == [TEXT] * 3
        assert {i.key for i in store.search(("user", "alice"))} == {"t1", "t2"}


def test_a_key_stored_twice_is_healed_by_the_next_put(settings: Any) -> None:
    """Two memories for one key (two processes putting it at once): get answers the newer,
    the next put leaves one."""
    with Lamina(settings) as ms:
        store = LaminaStore(ms)
        ns = ("user", "alice", "notes")
        store.put(ns, "k", {"content": "old"})
        [old] = ms.memory.list(user_id="alice").items
        meta = old.metadata["langgraph"]
        ms.memory.add(
            "new",
            layer="user",
            user_id="alice",
            metadata={"langgraph": {**meta, "value": {"content": "new"}}},
        )
        assert store.get(ns, "k").value == {"content": "new"}  # type: ignore[union-attr]
        store.put(ns, "k", {"content": "newest"})
        assert rows(ms, user_id="alice") == ["newest"]


def test_a_plain_memory_is_never_merged_into_a_stored_item(settings: Any) -> None:
    """The other direction: a plain add of a text an item already holds is its own memory
    (not the item, answered as a duplicate), so deleting or replacing the key leaves it; a
    second plain add is deduplicated against the first plain one as usual."""
    with Lamina(settings) as ms:
        store = LaminaStore(ms)
        ns = ("user", "alice", "notes")
        store.put(ns, "k", {"content": TEXT})
        store.put(ns, "moved", {"content": "first draft"})
        store.put(ns, "moved", {"content": "Lunch is at noon"})  # its text replaced
        plain = ms.memory.add(TEXT, layer="user", user_id="alice", metadata={"by": "hand"})
        lunch = ms.memory.add("Lunch is at noon", layer="user", user_id="alice")
        assert not plain.deduplicated and not lunch.deduplicated
        assert plain.metadata == {"by": "hand"} and lunch.metadata == {}
        again = ms.memory.add(TEXT, layer="user", user_id="alice")
        assert again.deduplicated and again.id == plain.id
        store.delete(ns, "k")
        store.put(ns, "moved", {"content": "something else"})
        assert store.get(ns, "k") is None
        assert sorted(rows(ms, user_id="alice")) == sorted(
            [TEXT, "Lunch is at noon", "something else"]
        )
        assert ms.memory.get(plain.id) is not None and ms.memory.get(lunch.id) is not None


def test_an_invalidated_item_is_gone_from_every_read(settings: Any) -> None:
    """A memory no longer valid (ms.memory.invalidate) is no item: not got, not found by a
    search of its scope or of a prefix reaching every user, its namespace not listed; a
    new put of its key is the key's one item everywhere."""
    with Lamina(settings) as ms:
        store = LaminaStore(ms)
        ns = ("user", "alice", "prefs")
        store.put(ns, "theme", {"content": "dark mode"})
        [old] = ms.memory.list(user_id="alice").items
        ms.memory.invalidate(old.id)
        assert store.get(ns, "theme") is None
        for prefix in (ns, ("user",), ()):
            assert store.search(prefix) == [], prefix
        assert store.list_namespaces() == []
        store.put(ns, "theme", {"content": "light mode"})
        for prefix in (ns, ("user",), ()):
            assert [(i.key, i.value) for i in store.search(prefix)] == [
                ("theme", {"content": "light mode"})
            ], prefix
        assert store.list_namespaces() == [ns]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_thousand_keys_of_one_text(settings: Any, mode: str) -> None:
    ns = ("user", "alice", "facts")
    puts = [PutOp(ns, f"k{i}", {"content": TEXT, "i": i}) for i in range(N)]
    gets = [GetOp(ns, f"k{i}") for i in range(N)]

    def check(got: list[Any], found: list[Any], ranked: list[Any]) -> None:
        assert [(g.key, g.value) for g in got] == [
            (f"k{i}", {"content": TEXT, "i": i}) for i in range(N)
        ]
        assert {i.key for i in found} == {f"k{i}" for i in range(N)}
        assert {i.key for i in ranked} == {f"k{i}" for i in range(N)}

    if mode == "sync":
        with Lamina(settings) as ms:
            store = LaminaStore(ms)
            store.batch(puts)
            check(
                store.batch(gets),
                store.search(("user",), limit=N + 1),
                store.search(ns, query="when is the deploy window?", limit=N),
            )
            assert store.list_namespaces() == [ns]
        return

    async def run() -> None:
        async with AsyncLamina(settings) as ams:
            store = LaminaStore(ams)
            await store.abatch(puts)
            check(
                await store.abatch(gets),
                await store.asearch(("user",), limit=N + 1),
                await store.asearch(ns, query="when is the deploy window?", limit=N),
            )
            assert await store.alist_namespaces(prefix=("user",)) == [ns]

    asyncio.run(run())


def test_where_lamina_differs_it_says_so(settings: Any) -> None:
    """A namespace without a layer and no default scope, a value too large, a secret in a
    shared layer: each a clear error with its code, nothing stored."""
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    with Lamina(settings) as ms:
        store = LaminaStore(ms)
        cases: list[tuple[tuple[str, ...], dict[str, Any], ErrorCode]] = [
            (("docs",), {"content": "x"}, ErrorCode.INVALID_ARGUMENT),
            (("agent", "bot"), {"content": "x"}, ErrorCode.INVALID_ARGUMENT),
            # The value as the memory's text: memory.max_content_length characters at most.
            (("user", "alice"), {"blob": "x" * 70_000}, ErrorCode.CONTENT_TOO_LONG),
            # The value in the memory's metadata: 64 KB of JSON at most.
            (
                ("user", "alice"),
                {"content": "short", "blob": "x" * 70_000},
                ErrorCode.INVALID_ARGUMENT,
            ),
            (("user", "alice"), {"content": "fine", "bad": {1, 2}}, ErrorCode.INVALID_ARGUMENT),
            (("user", "alice"), {"content": "fine", "n": float("nan")}, ErrorCode.INVALID_ARGUMENT),
            (("user", "alice"), {"content": "fine", "d": {1: "x"}}, ErrorCode.INVALID_ARGUMENT),
            # Text no store can hold: a NUL (PostgreSQL) or a lone surrogate, value or key.
            (("user", "alice"), {"content": "fine", "n": "a\x00b"}, ErrorCode.INVALID_ARGUMENT),
            (("user", "alice"), {"content": "fine", "k\x00": 1}, ErrorCode.INVALID_ARGUMENT),
            (("user", "alice"), {"content": "fine", "n": "\ud800"}, ErrorCode.INVALID_ARGUMENT),
            (("project", "p1"), {"content": f"the key is {key}"}, ErrorCode.POLICY_VIOLATION),
            (("project", "p1"), {"content": "fine", "note": key}, ErrorCode.POLICY_VIOLATION),
        ]
        for namespace, value, code in cases:
            with pytest.raises(LaminaError) as err:
                store.put(namespace, "k", value)
            assert err.value.code is code, (namespace, err.value)
        for bad_key in ("k\x00", "k\ud800"):
            with pytest.raises(LaminaError) as err:
                store.put(("user", "alice"), bad_key, {"content": "x"})
            assert err.value.code is ErrorCode.INVALID_ARGUMENT, bad_key
            # A key no store can hold names nothing: read and deleted as nothing.
            assert store.get(("user", "alice"), bad_key) is None
            store.delete(("user", "alice"), bad_key)
        # A filter on text no store holds matches nothing, as in LangGraph.
        store.put(("user", "alice"), "kept", {"content": "kept", "n": "a"})
        for text in ("a\x00", "\ud800"):
            for query in (None, "kept"):
                assert store.search(("user", "alice"), query=query, filter={"n": text}) == []
        store.delete(("user", "alice"), "kept")
        # (a NUL in a label LangGraph's own BaseStore refuses, before lamina sees it)
        with pytest.raises(LaminaError) as err:
            store.get(("user", "al\ud800ice"), "k")
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
        assert store.search(()) == []
        assert store.list_namespaces() == []
        # A search with a query ranks at most memory.max_limit items; without, any number.
        for call in (
            lambda: store.search(("user",), query="x", limit=1001),
            lambda: store.search(("user", "alice"), query="x", limit=10, offset=995),
        ):
            with pytest.raises(LaminaError) as err:
                call()
            assert err.value.code is ErrorCode.INVALID_ARGUMENT
            assert "memory.max_limit" in err.value.message
        assert store.search(("user",), limit=5000) == []
        # One bad put refuses its whole batch before anything is written.
        with pytest.raises(LaminaError):
            store.batch(
                [PutOp(("user", "alice"), "ok", {"content": "ok"}), PutOp(("docs",), "k", {})]
            )
        assert store.get(("user", "alice"), "ok") is None


def test_pages_of_a_query_search_cover_equal_scores_once(settings: Any) -> None:
    """Many keys of one text score the same: pages (offset, limit) of a query search still
    give each item once, across scopes too."""
    with Lamina(settings) as ms:
        store = LaminaStore(ms)
        puts = [PutOp(("user", "alice", "n"), f"a{i}", {"content": TEXT}) for i in range(25)]
        puts += [PutOp(("user", "bob", "n"), f"b{i}", {"content": TEXT}) for i in range(5)]
        puts.append(PutOp(("user", "bob", "n"), "other", {"content": "Lunch is at noon"}))
        store.batch(puts)
        for prefix, count in [(("user", "alice"), 25), (("user",), 31)]:
            seen: list[tuple[tuple[str, ...], str]] = []
            for offset in range(0, 40, 4):
                page = store.search(prefix, query="the deploy window", limit=4, offset=offset)
                seen += [(i.namespace, i.key) for i in page]
            assert len(seen) == len(set(seen)) == count
        # The one other text ranks last.
        assert seen[-1] == (("user", "bob", "n"), "other")
