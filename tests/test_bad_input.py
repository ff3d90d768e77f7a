"""Bad input gets a clear error with its ErrorCode and never loses or corrupts stored data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres

SQL = "'; DROP TABLE memories; --\" OR 1=1 /* %_ \\ */"


def expect(code: ErrorCode, call: Any, *args: Any, **kwargs: Any) -> LaminaError:
    with pytest.raises(LaminaError) as err:
        call(*args, **kwargs)
    assert err.value.code is code, err.value
    assert err.value.message
    return err.value


def count(data_dir: Path, **ids: str) -> int:
    with Lamina(fast_settings(data_dir)) as reopened:
        return reopened.memory.list(limit=1, **ids).total_count


def test_every_error_on_bad_input_leaves_data_intact(ms: Lamina, data_dir: Path) -> None:
    keep = ms.memory.add(
        "a memory that must survive", layer="user", user_id="u", metadata={"tags": ["keep"]}
    )
    add = ms.memory.add
    for content in ("", "   \n\t ", None, 42, "nul\x00byte", "lone \ud800 surrogate"):
        expect(ErrorCode.INVALID_ARGUMENT, add, content, layer="user", user_id="u")
    err = expect(ErrorCode.CONTENT_TOO_LONG, add, "x" * (1024 * 1024), layer="user", user_id="u")
    assert err.details["max_length"] == 65_536 and not err.retryable
    expect(ErrorCode.INVALID_LAYER, add, "x", layer="nope", user_id="u")
    expect(ErrorCode.MISSING_IDENTIFIER, add, "x", layer="user")
    expect(ErrorCode.MISSING_IDENTIFIER, add, "x", layer="user", user_id="  ")
    expect(ErrorCode.INVALID_ARGUMENT, add, "x", layer="user", user_id="a" * 300)
    for metadata in (
        "not a dict",
        {"n": float("nan")},
        {"tags": "ui"},
        {"tags": [1]},
        {"obj": object()},
        {"big": "x" * 70_000},
        {1: "int key"},
    ):
        expect(ErrorCode.INVALID_ARGUMENT, add, "x", layer="user", user_id="u", metadata=metadata)
    search = ms.memory.search
    expect(ErrorCode.QUERY_TOO_LONG, search, "q" * 5000, user_id="u")
    expect(ErrorCode.INVALID_ARGUMENT, search, "", user_id="u")
    expect(ErrorCode.INVALID_ARGUMENT, search, "q", user_id="u", mode="fuzzy")
    expect(ErrorCode.INVALID_ARGUMENT, search, "q", user_id="u", limit=0)
    expect(ErrorCode.INVALID_ARGUMENT, search, "q", user_id="u", limit=100_000)
    expect(ErrorCode.INVALID_ARGUMENT, search, "q", user_id="u", threshold="high")
    expect(ErrorCode.MISSING_IDENTIFIER, search, "q")
    expect(ErrorCode.INVALID_LAYER, search, "q", user_id="u", layers=["planet"])
    for filters in (
        {"f": {"like": 1}},
        {"bad field!": 1},
        {"f": {"in": "x"}},
        {"f": {"in": []}},
        {"f": {"gt": None}},
        {"f": {"gt": True}},
        {"f": {}},
        {"f": {"eq": [1]}},
        {"f": {"contains": None}},
        "not-an-object",
    ):
        expect(ErrorCode.INVALID_FILTER, search, "q", user_id="u", filters=filters)
        expect(ErrorCode.INVALID_FILTER, ms.memory.list, user_id="u", filters=filters)
    expect(ErrorCode.INVALID_FILTER, search, "q", user_id="u", tags=[""])
    expect(ErrorCode.INVALID_ARGUMENT, ms.memory.list, user_id="u", cursor="garbage!")
    expect(ErrorCode.INVALID_ARGUMENT, ms.memory.get, "")
    expect(ErrorCode.MEMORY_NOT_FOUND, ms.memory.update, "unknown", content="x")
    expect(ErrorCode.CONTENT_TOO_LONG, ms.memory.update, keep.id, content="x" * 70_000)
    expect(ErrorCode.INVALID_ARGUMENT, ms.memory.update, keep.id, metadata={"tags": 5})
    expect(ErrorCode.MEMORY_NOT_FOUND, ms.memory.history, "unknown")
    assert ms.memory.get("unknown") is None
    assert ms.memory.delete("unknown").success
    assert ms.memory.get(keep.id) == keep
    ms.close()
    assert count(data_dir, user_id="u") == 1


def test_large_and_international_content_round_trips(data_dir: Path) -> None:
    settings = fast_settings(data_dir, memory={"max_content_length": 2_000_000})
    texts = {
        "megabyte": "memory " * (1024 * 1024 // 7),
        "unicode": "Zoë’s café serves crème brûlée — naïve façade",
        "cjk": "用户喜欢在编辑器中使用深色模式。東京の会議は月曜日です。",
        "emoji": "Ships on Fridays 🚀🔥 — celebrate with 🍕",
        "rtl": "المستخدم يفضل الوضع الداكن",
    }
    with Lamina(settings) as ms:
        ids = {
            name: ms.memory.add(text, layer="user", user_id="u").id for name, text in texts.items()
        }
        nested = ms.memory.add(
            "nested metadata",
            layer="user",
            user_id="u",
            metadata={"a": {"b": {"c": [1, {"d": "深"}]}}, "emoji": "🎉"},
        )
    with Lamina(settings) as ms:
        for name, text in texts.items():
            got = ms.memory.get(ids[name])
            assert got is not None and got.content == text, name
        assert ms.memory.get(nested.id) == nested
        found = ms.memory.list(user_id="u", filters={"emoji": "🎉"})
        assert [m.id for m in found.items] == [nested.id]
        hits = ms.memory.search("crème brûlée", user_id="u", mode="keyword")
        assert [h.memory.id for h in hits] == [ids["unicode"]]
        hits = ms.memory.search("Fridays", user_id="u", mode="keyword")
        assert [h.memory.id for h in hits] == [ids["emoji"]]
        assert ms.memory.search("🚀", user_id="u", mode="keyword") == []
        semantic = ms.memory.search(texts["cjk"], user_id="u", threshold=0.9)
        assert [h.memory.id for h in semantic] == [ids["cjk"]]
        assert ms.memory.list(user_id="u").total_count == len(texts) + 1


def test_sql_meta_characters_in_every_string_field(ms: Lamina, data_dir: Path) -> None:
    ids = {
        name: f"{name}{SQL}"
        for name in (
            "agent_id",
            "user_id",
            "session_id",
            "project_id",
            "team_id",
            "org_id",
            "company_id",
        )
    }
    tenant = f"tenant{SQL}"
    meta = {"tags": [SQL, "plain"], "field": SQL, "nested": {"k": SQL}}
    entries = [
        ms.memory.add(
            f"memory {SQL} {layer}", layer=layer, metadata=meta, actor=SQL, tenant_id=tenant, **ids
        )
        for layer in ("agent", "user", "session", "project", "team", "org", "company")
    ]
    for mode in ("semantic", "keyword", "hybrid"):
        hits = ms.memory.search(
            f"memory {SQL}",
            mode=mode,
            threshold=0.0,
            tags=[SQL],
            filters={"field": SQL, "nested.k": {"contains": "DROP"}},
            tenant_id=tenant,
            limit=20,
            **ids,
        )
        assert len(hits) >= 1, mode
    ms.memory.register_hierarchy(
        project_id=ids["project_id"], team_id=ids["team_id"], tenant_id=tenant
    )
    updated = ms.memory.update(
        entries[0].id, content=f"updated {SQL}", metadata={SQL[:10]: 1}, actor=SQL, tenant_id=tenant
    )
    assert updated.content == f"updated {SQL}"
    assert ms.memory.get(entries[1].id, tenant_id=tenant) == entries[1]
    assert ms.memory.get(SQL, tenant_id=tenant) is None
    assert ms.memory.delete(SQL, tenant_id=tenant).existed is False
    expect(ErrorCode.MEMORY_NOT_FOUND, ms.memory.history, SQL, tenant_id=tenant)
    assert ms.memory.history(entries[0].id, tenant_id=tenant)[-1].actor == SQL
    expect(ErrorCode.INVALID_FILTER, ms.memory.search, "x", user_id="u", filters={SQL: 1})
    ms.close()
    with Lamina(fast_settings(data_dir)) as reopened:
        page = reopened.memory.list(tenant_id=tenant, limit=100, **ids)
        assert page.total_count == 7
        assert {m.id for m in page.items} == {e.id for e in entries}


def test_a_locked_database_is_a_retryable_provider_error(data_dir: Path) -> None:
    import sqlite3
    import threading
    import time

    settings = fast_settings(data_dir, sqlite_busy_timeout=0.05)
    with Lamina(settings) as ms:
        kept = ms.memory.add("written before the lock", layer="user", user_id="u")
        blocker = sqlite3.connect(
            data_dir / "lamina.db", isolation_level=None, check_same_thread=False
        )
        blocker.execute("BEGIN EXCLUSIVE")
        with pytest.raises(LaminaError) as err:
            ms.memory.add("blocked", layer="user", user_id="u")
        assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
        assert "locked" in err.value.message or "busy" in err.value.message
        timer = threading.Timer(0.1, lambda: blocker.execute("ROLLBACK"))
        timer.start()
        time.sleep(0.01)
        # The lock goes away while the retries (10 ms, 20 ms, 40 ms, ...) are under way.
        retried = fast_settings(
            data_dir,
            sqlite_busy_timeout=0.05,
            retry={"max_retries": 6, "initial_delay": 0.05, "max_delay": 0.2},
        )
        with Lamina(retried) as other:
            other.memory.add("written after the lock", layer="user", user_id="u")
        timer.join()
        blocker.close()
        page = ms.memory.list(user_id="u")
        assert sorted(m.content for m in page.items) == [
            "written after the lock",
            "written before the lock",
        ]
        assert ms.memory.get(kept.id) == kept


class _BrokenEmbedder:
    """A third-party embedder with a bug: it raises something that is not a LaminaError."""

    model_id = "broken"
    dimensions = 4

    async def embed(self, texts: Any) -> Any:
        raise RuntimeError("secret internal detail")

    async def aclose(self) -> None:
        return None


def test_unexpected_failures_are_internal_errors_without_details(tmp_path: Path) -> None:
    with Lamina(fast_settings(tmp_path / "d"), embedder=_BrokenEmbedder()) as ms:
        err = expect(ErrorCode.INTERNAL_ERROR, ms.memory.add, "x", layer="user", user_id="u")
        assert "secret" not in err.message and not err.retryable
        assert 'code="INTERNAL_ERROR"' in ms.metrics_text()
        assert ms.memory.list(user_id="u").total_count == 0


def test_a_damaged_database_file_is_a_clear_error(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    (data_dir / "lamina.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(LaminaError) as err:
        Lamina(fast_settings(data_dir))
    assert err.value.code is ErrorCode.PROVIDER_ERROR and not err.value.retryable
    assert "damaged" in err.value.message


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_text_no_store_can_hold_is_refused_the_same_on_both_stores(
    store: str, data_dir: Path
) -> None:
    """A NUL (PostgreSQL text and jsonb hold none) or a lone surrogate (no store holds one)
    in metadata, a filter or a tag: INVALID_ARGUMENT / INVALID_FILTER, never an internal
    error, and what was stored stays as it was."""
    extra: dict[str, Any] = {}
    if store == "postgres":
        extra["database_url"] = require_postgres()
        empty_database(extra["database_url"])
    with Lamina(fast_settings(data_dir, **extra)) as ms:
        keep = ms.memory.add("kept", layer="user", user_id="u", metadata={"a": "b"})
        for metadata in ({"a": "x\x00y"}, {"a\x00": 1}, {"a": ["\ud800"]}, {"k\ud800": 1}):
            expect(
                ErrorCode.INVALID_ARGUMENT,
                ms.memory.add,
                "x",
                layer="user",
                user_id="u",
                metadata=metadata,
            )
            expect(ErrorCode.INVALID_ARGUMENT, ms.memory.update, keep.id, metadata=metadata)
        for bad in ("b\x00", "\ud800"):
            for filters in ({"a": bad}, {"a": {"in": ["b", bad]}}, {"a": {"contains": bad}}):
                expect(
                    ErrorCode.INVALID_FILTER, ms.memory.search, "kept", user_id="u", filters=filters
                )
                expect(ErrorCode.INVALID_FILTER, ms.memory.list, user_id="u", filters=filters)
            expect(ErrorCode.INVALID_FILTER, ms.memory.list, user_id="u", tags=[bad])
        [only] = ms.memory.list(user_id="u").items
        assert (only.id, only.content, only.metadata) == (keep.id, "kept", {"a": "b"})
