"""One call script against LangGraph's own ``InMemoryStore`` and lamina's ``LaminaStore``
(on SQLite and on PostgreSQL, through the blocking and the async methods): the same items,
keys, namespaces, values and errors.

Where LangGraph defines no order (a search without a query: InMemoryStore answers in
insertion order, LangGraph's PostgresStore newest first, lamina newest first within one
scope), results are compared as sets, and pages (limit, offset) must cover the same set
without overlap. With a query both rank by the same local embedder (InMemoryStore indexes
``content``, ``text`` and ``title``); lamina's hybrid search ranks its own way, so the sets
are compared, and the best hit where one is plainly best."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError
from lamina.embeddings.local import LocalEmbedder
from lamina.integrations.langgraph import LaminaStore
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

DEFAULT = {"layer": "project", "project_id": "graph"}
ALICE = ("user", "alice", "prefs")
BOB = ("user", "bob", "prefs")
RUNBOOKS = ("docs", "runbooks")
WHEN = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
#: The call script's items: one text under several keys and namespaces, nested JSON,
#: datetimes, dates, times and tuples.
ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (ALICE, "theme", {"content": "Alice prefers dark mode", "priority": 2}),
    (
        ALICE,
        "editor",
        {
            "content": "Alice edits her code in vim",
            "priority": 5,
            "tags": ["tools", "dev"],
            "meta": {"since": WHEN, "level": {"n": 1}},
        },
    ),
    (ALICE, "t2", {"content": "Alice prefers dark mode", "priority": 3}),
    (BOB, "theme", {"content": "Alice prefers dark mode", "priority": 2}),
    (
        RUNBOOKS,
        "r1",
        {
            "title": "Failover",
            "status": "active",
            "at": WHEN,
            "span": (1, 2),
            "day": date(2026, 3, 1),
        },
    ),
    ((*RUNBOOKS, "db"), "r2", {"title": "Backups", "status": "draft", "at": time(4, 5)}),
    (("agent", "bot", "alice", "notes"), "n1", {"text": "the bot keeps a note"}),
]

Call = Callable[..., Awaitable[Any]]
Observed = list[tuple[str, Any]]


def shape(result: Any) -> Any:
    """A result as the script compares it: items as (namespace, key, value)."""
    if result is None or isinstance(result, tuple):
        return result
    if isinstance(result, list):
        return [shape(r) for r in result]
    return (result.namespace, result.key, result.value)


def as_set(items: list[Any]) -> list[Any]:
    return sorted((shape(i) for i in items), key=repr)


async def page_through(
    call: Call, prefix: tuple[str, ...], size: int, query: str | None = None
) -> list[Any]:
    """Every page of a search, checked to have no item twice."""
    seen: list[Any] = []
    offset = 0
    while page := await call("search", prefix, query=query, limit=size, offset=offset):
        assert len(page) <= size
        seen += [shape(i) for i in page]
        offset += size
    assert len(seen) == len(set(map(repr, seen)))
    return sorted(seen, key=repr)


async def script(call: Call) -> Observed:
    """The calls; what each returns (or the error type it raises), to be compared."""
    out: Observed = []
    for namespace, key, value in ITEMS:
        await call("put", namespace, key, value)
    for namespace, key, _ in ITEMS:
        out.append(("get", shape(await call("get", namespace, key))))
    out.append(("get missing", await call("get", ALICE, "nope")))
    for prefix in [(), ("user",), ("user", "alice"), ALICE, ("docs",), ("agent",), ("zzz",)]:
        out.append((f"search {prefix}", as_set(await call("search", prefix, limit=100))))
        out.append((f"pages {prefix}", await page_through(call, prefix, 2)))
    for prefix, wanted in [
        (ALICE, {"priority": {"$gte": 3}}),
        (ALICE, {"priority": {"$gt": 2, "$lt": 5}}),
        (("user",), {"priority": 2}),
        ((), {"status": "active"}),
        ((), {"status": {"$ne": "active"}}),
        ((), {"meta": {"level": {"n": 1}}}),
        ((), {"tags": ["tools", "dev"]}),
        ((), {"at": WHEN}),
        ((), {"at": WHEN.isoformat()}),  # a datetime is not its text
        ((), {"span": (1, 2)}),
        ((), {"content": {"$eq": "Alice prefers dark mode"}}),
    ]:
        found = await call("search", prefix, filter=wanted, limit=100)
        out.append((f"filter {prefix} {wanted}", as_set(found)))
    for query in ["which text editor does she use?", "failover"]:
        found = await call("search", (), query=query, limit=100)
        out.append((f"query {query}", as_set(found)))
        out.append((f"query pages {query}", await page_through(call, ("user",), 2, query)))
    best = await call("search", ("user",), query="which text editor does she use?", limit=1)
    out.append(("best", shape(best)))
    for args in [
        {},
        {"prefix": ("user",)},
        {"prefix": ("user", "alice"), "max_depth": 2},
        {"suffix": ("prefs",)},
        {"prefix": ("user", "*", "prefs")},
        {"prefix": ("docs",), "suffix": ("db",)},
        {"max_depth": 1},
        {"limit": 2, "offset": 1},
    ]:
        out.append((f"namespaces {args}", await call("list_namespaces", **args)))

    # Overwrite: the new value whole (no field of the old one left), updated_at moves on.
    before = await call("get", ALICE, "editor")
    await call("put", ALICE, "editor", {"content": "Alice moved to helix", "priority": 1})
    after = await call("get", ALICE, "editor")
    out.append(("overwritten", shape(after)))
    assert after.updated_at > before.updated_at
    out.append(("after overwrite", as_set(await call("search", ALICE, limit=100))))
    await call("delete", ALICE, "t2")
    await call("delete", ALICE, "t2")  # deleting again is no error
    out.append(("deleted", await call("get", ALICE, "t2")))
    out.append(("after delete", as_set(await call("search", ("user",), limit=100))))

    # A batch: its reads see the store before its writes; the last put of a key wins.
    results = await call(
        "batch",
        [
            PutOp(BOB, "b1", {"content": "first"}),
            GetOp(BOB, "b1"),
            PutOp(BOB, "b1", {"content": "second"}),
            PutOp(BOB, "theme", None),
            SearchOp(("user", "bob"), None, 10, 0),
            ListNamespacesOp(None, None, 100, 0),
        ],
    )
    out.append(("batch", [r if r is None else shape(r) for r in results]))
    out.append(("after batch", as_set(await call("search", BOB, limit=100))))

    # Last: InMemoryStore lists a namespace once it was read (lamina: while it holds items).
    out.append(("get nowhere", await call("get", ("user", "zed"), "theme")))

    # Errors where LangGraph raises: the same type.
    for name, args in [
        ("put", (("langgraph", "x"), "k", {"v": 1})),
        ("put", ((), "k", {"v": 1})),
        ("put", (("a.b",), "k", {"v": 1})),
        ("get", (("",), "k")),
        ("search", (("a.b",),)),
    ]:
        try:
            await call(name, *args)
            out.append((f"{name} {args}", "no error"))
        except Exception as exc:
            out.append((f"{name} {args}", type(exc).__name__))
    try:
        await call("put", ALICE, "ttl", {"v": 1}, ttl=5)
    except NotImplementedError:
        out.append(("ttl", "NotImplementedError"))
    return out


def caller(store: BaseStore, mode: str) -> Call:
    """The script's calls through the async methods, or the blocking ones in a thread."""

    async def call(name: str, *args: Any, **kwargs: Any) -> Any:
        if mode == "async":
            return await getattr(store, f"a{name}")(*args, **kwargs)
        return await asyncio.to_thread(getattr(store, name), *args, **kwargs)

    return call


def reference() -> InMemoryStore:
    embedder = LocalEmbedder()

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in v] for v in embedder.embed_sync(texts)]

    return InMemoryStore(
        index={"dims": 384, "embed": embed, "fields": ["content", "text", "title"]}
    )


@asynccontextmanager
async def lamina_store(param: str, data_dir: Path, mode: str) -> AsyncIterator[LaminaStore]:
    extra: dict[str, Any] = {}
    if param == "postgres":
        url = require_postgres()
        empty_database(url)
        extra["database_url"] = url
    settings = fast_settings(data_dir, **extra)
    if mode == "async":
        async with AsyncLamina(settings) as ams:
            yield LaminaStore(ams, scope=DEFAULT)
    else:
        ms = await asyncio.to_thread(Lamina, settings)
        try:
            yield LaminaStore(ms, scope=DEFAULT)
        finally:
            await asyncio.to_thread(ms.close)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("param", ["sqlite", "postgres"])
def test_the_same_script_gives_the_same_answers(param: str, mode: str, data_dir: Path) -> None:
    async def run() -> tuple[Observed, Observed]:
        expected = await script(caller(reference(), mode))
        async with lamina_store(param, data_dir, mode) as store:
            got = await script(caller(store, mode))
        return expected, got

    expected, got = asyncio.run(run())
    assert [name for name, _ in got] == [name for name, _ in expected]
    for (name, want), (_, have) in zip(expected, got, strict=True):
        assert have == want, name


@pytest.mark.parametrize("param", ["sqlite", "postgres"])
def test_times_and_values_round_trip(param: str, data_dir: Path) -> None:
    """get returns what put was given (datetimes, dates, times, tuples, nested JSON, equal
    and of the same types); created_at is kept on overwrite (as LangGraph's PostgresStore;
    InMemoryStore makes a new item) and updated_at moves on."""

    async def run() -> None:
        async with lamina_store(param, data_dir, "async") as store:
            value = {
                "at": WHEN,
                "naive": datetime(2026, 1, 2, 3, 4, 5, 6),
                "day": date(2026, 1, 2),
                "clock": time(23, 59, 1),
                "pair": (1, (2, [WHEN])),
                "deep": {"list": [{"x": None, "y": 1.5, "z": True}], "empty": {}},
                "text": "ünïcode ✓",
            }
            await store.aput(ALICE, "v", value)
            first = await store.aget(ALICE, "v")
            assert first is not None and first.value == value
            assert type(first.value["pair"][1]) is tuple
            assert type(first.value["naive"]) is datetime and first.value["naive"].tzinfo is None
            await store.aput(ALICE, "v", {"content": "new"})
            second = await store.aget(ALICE, "v")
            assert second is not None and second.value == {"content": "new"}
            assert second.created_at == first.created_at
            assert second.updated_at > first.updated_at
            [found] = await store.asearch(ALICE, filter={"content": "new"})
            assert (found.created_at, found.updated_at) == (second.created_at, second.updated_at)

    asyncio.run(run())


def test_lamina_filters_refuse_unknown_operators(data_dir: Path) -> None:
    """InMemoryStore raises ValueError once it meets an item; lamina refuses the filter
    itself: INVALID_FILTER, also where nothing is stored."""
    reference_store = InMemoryStore()
    reference_store.put(ALICE, "k", {"n": 1})
    with pytest.raises(ValueError, match="Unsupported operator"):
        reference_store.search(ALICE, filter={"n": {"$regex": "x"}})
    with Lamina(fast_settings(data_dir)) as ms:
        store = LaminaStore(ms)
        for prefix in (ALICE, ("user", "nobody")):
            with pytest.raises(LaminaError) as err:
                store.search(prefix, filter={"n": {"$regex": "x"}})
            assert err.value.code is ErrorCode.INVALID_FILTER
