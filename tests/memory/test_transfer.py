"""delete_all, export and import through the library (the embedded store): what a user
does, the records they get, and every bad input refused without touching stored data."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lamina import Lamina
from lamina.errors import ErrorCode, LaminaError
from lamina.memory import transfer
from lamina.memory.records import dump_record
from tests.conftest import fast_settings


def fill(ms: Lamina) -> dict[str, str]:
    """Memories of every kind: plain, updated, tagged, in several layers, a conversation."""
    a = ms.memory.add("Alice prefers window seats", layer="user", user_id="alice", actor="ann")
    ms.memory.update(a.id, content="Alice prefers aisle seats", metadata={"n": 2}, actor="bob")
    b = ms.memory.add(
        "The build runs on Fridays", layer="project", project_id="p1", metadata={"tags": ["ci"]}
    )
    c = ms.memory.add("Bot answers in French", layer="agent", agent_id="bot", user_id="alice")
    ms.memory.add("Session note", layer="session", session_id="s1", user_id="alice")
    ms.memory.add("Bob likes tea", layer="user", user_id="bob")
    # Time fields travel too: an event time, a validity interval that was closed, an expiry.
    berlin = ms.memory.add(
        "Alice lives in Berlin",
        layer="user",
        user_id="alice",
        timestamp="2021-03-04T05:06:07Z",
        valid_from="2021-01-01T00:00:00Z",
        ttl=86_400 * 365,
    )
    ms.memory.invalidate([berlin.id], at="2024-05-01T00:00:00Z")
    ms.memory.add_messages(
        [
            {"role": "user", "content": "I moved to Lisbon", "timestamp": "2024-05-01T10:00:00"},
            {"role": "assistant", "content": "Nice city!"},
        ],
        user_id="alice",
        conversation_id="talk-1",
    )
    return {"updated": a.id, "project": b.id, "agent": c.id}


def lines(ms: Lamina, **kw: Any) -> list[str]:
    return [dump_record(r) for r in ms.memory.export(**kw)]


def write(path: Path, rows: list[str]) -> Path:
    path.write_text("".join(f"{r}\n" for r in rows), encoding="utf-8")
    return path


def test_export_import_export_gives_the_same_records(ms: Lamina, tmp_path: Path) -> None:
    ids = fill(ms)
    ms.memory.add("Gone already", layer="user", user_id="alice", ttl=1)
    time.sleep(1.1)  # "Gone already" expires: it is never exported
    first = lines(ms, embeddings=True, history=True)
    assert len(first) == 8 and not any("Gone already" in r for r in first)
    berlin = json.loads(next(r for r in first if "Berlin" in r))
    assert berlin["event_at"].startswith("2021-03-04T05:06:07")
    assert berlin["valid_from"].startswith("2021-01-01T00:00:00")
    assert berlin["valid_until"].startswith("2024-05-01T00:00:00")
    assert berlin["expires_at"] is not None and "deduplicated" not in berlin
    record = json.loads(next(r for r in first if ids["updated"] in r))
    assert record["content"] == "Alice prefers aisle seats" and record["metadata"] == {"n": 2}
    assert [e["operation"] for e in record["history"]] == ["add", "update"]
    assert record["history"][1]["old_content"] == "Alice prefers window seats"
    assert record["history"][1]["actor"] == "bob" and "embedding" in record
    source = write(tmp_path / "export.jsonl", first)
    with Lamina(fast_settings(tmp_path / "other")) as other:
        seen: list[tuple[int, int | None]] = []
        report = other.memory.import_(
            source, on_progress=lambda d, t: seen.append((d, t)), batch_size=3
        )
        assert report.model_dump() == {"records": 8, "imported": 8, "skipped": 0, "embedded": 0}
        assert seen == [(3, 8), (6, 8), (8, 8)]
        assert lines(other, embeddings=True, history=True) == first
        again = other.memory.import_(source)
        assert (again.imported, again.skipped) == (0, 8)
        assert lines(other, embeddings=True, history=True) == first
        # The imported memories are found, and the conversation continues after them.
        hits = other.memory.search("aisle seats", user_id="alice", threshold=0.0)
        assert hits[0].memory.id == ids["updated"]
        more = other.memory.add_messages(
            [{"role": "user", "content": "And then Porto"}],
            user_id="alice",
            conversation_id="talk-1",
        )
        assert more.memories[0].metadata["conversation"]["position"] == 2


def test_import_without_vectors_embeds_and_without_history_records_an_add(
    ms: Lamina, tmp_path: Path
) -> None:
    fill(ms)
    plain = lines(ms)
    assert all("embedding" not in json.loads(r) and "history" not in json.loads(r) for r in plain)
    with Lamina(fast_settings(tmp_path / "other")) as other:
        report = other.memory.import_(write(tmp_path / "plain.jsonl", plain), actor="migration")
        assert (report.imported, report.embedded) == (8, 8)
        assert lines(other) == plain
        record = json.loads(plain[0])
        events = other.memory.history(record["id"])
        assert [(e.operation.value, e.actor) for e in events] == [("add", "migration")]
        assert other.memory.search("window seats", user_id="alice", mode="semantic", threshold=0.3)


def test_export_filters_and_pages(ms: Lamina) -> None:
    ids = fill(ms)
    alice = [json.loads(r) for r in lines(ms, user_id="alice")]
    assert len(alice) == 6 and all(r["identifiers"]["user_id"] == "alice" for r in alice)
    agent = [json.loads(r) for r in lines(ms, user_id="alice", layers=["agent"])]
    assert [r["id"] for r in agent] == [ids["agent"]]
    project = [json.loads(r) for r in lines(ms, project_id="p1")]
    assert [r["id"] for r in project] == [ids["project"]]
    assert lines(ms, batch_size=2) == lines(ms)
    assert lines(ms, tenant_id="someone-else") == []
    stream = ms.memory.export(batch_size=1)
    assert next(stream)["content"] == "Alice prefers aisle seats"  # a generator: lazy
    stream.close()


def test_list_counts_up_to_its_count_limit(ms: Lamina) -> None:
    for i in range(12):
        ms.memory.add(f"counted fact {i}", layer="user", user_id="cora")
    capped = ms.memory.list(user_id="cora", limit=3, count_limit=10)
    assert (capped.total_count, capped.total_exact, len(capped.items)) == (10, False, 3)
    exact = ms.memory.list(user_id="cora", limit=3)
    assert (exact.total_count, exact.total_exact) == (12, True)
    for bad in (0, -1, "5", True):
        with pytest.raises(LaminaError) as err:
            ms.memory.list(user_id="cora", count_limit=bad)
        assert err.value.code is ErrorCode.INVALID_ARGUMENT, bad


def test_delete_all_forgets_a_user_and_refuses_an_empty_scope(ms: Lamina, data_dir: Path) -> None:
    fill(ms)
    secret = ms.memory.add("Zephyrnox is my pin hint", layer="user", user_id="alice")
    for bad, code in [
        ({}, ErrorCode.MISSING_IDENTIFIER),
        ({"layers": ["user"]}, ErrorCode.MISSING_IDENTIFIER),
        ({"user_id": "alice", "layers": ["nope"]}, ErrorCode.INVALID_LAYER),
        ({"user_id": "a\x00b"}, ErrorCode.INVALID_ARGUMENT),
        ({"user_id": "alice", "actor": 5}, ErrorCode.INVALID_ARGUMENT),
    ]:
        with pytest.raises(LaminaError) as err:
            ms.memory.delete_all(**bad)
        assert err.value.code is code, bad
        if "actor" not in bad:  # count_all takes the same selection, and refuses the same
            with pytest.raises(LaminaError) as err:
                ms.memory.count_all(**bad)
            assert err.value.code is code, bad
            assert "deletes" not in err.value.message  # it says what count_all does
    assert len(lines(ms)) == 9  # nothing lost
    assert ms.memory.count_all(user_id="alice", layers="session") == 1
    assert ms.memory.delete_all(user_id="alice", layers="session") == 1
    assert ms.memory.count_all(user_id="alice") == 6
    assert ms.memory.delete_all(user_id="alice", actor="dpo") == 6
    assert ms.memory.count_all(user_id="alice") == 0
    assert ms.memory.delete_all(user_id="alice") == 0
    left = [json.loads(r) for r in lines(ms)]
    assert sorted(r["content"] for r in left) == ["Bob likes tea", "The build runs on Fridays"]
    assert ms.memory.history(secret.id)[-1].actor == "dpo"
    # Not in the file, nor its write-ahead log, while the store is open.
    for path in data_dir.glob("lamina.db*"):
        assert b"zephyrnox" not in path.read_bytes().lower(), path


#: A good record's fields, to which a test adds one bad field.
_U = '"content": "x", "layer": "user", "identifiers": {"user_id": "u"}'


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ("{not json", None),
        ("[1, 2]", None),
        ('{"layer": "user", "identifiers": {"user_id": "u"}}', "content"),
        ('{"content": "x", "identifiers": {"user_id": "u"}}', "layer"),
        ('{"content": "x", "layer": "moon", "identifiers": {"user_id": "u"}}', None),
        ('{"content": "x", "layer": "user", "identifiers": {}}', None),
        (
            '{"content": "x", "layer": "user", "identifiers": {"user_id": "u", "org_id": "o"}}',
            "identifiers",
        ),
        (
            '{"content": "x", "layer": "user", "identifiers": {"user_id": "u"}, "colour": 1}',
            "colour",
        ),
        (
            "{" + _U + ', "created_at": "soon"}',
            "created_at",
        ),
        (
            '{"content": "x", "layer": "user", "identifiers": {"user_id": "u"}, "embedding": "@@"}',
            "embedding",
        ),
        (
            "{" + _U + ', "history": [{"operation": "zap"}]}',
            None,
        ),
        (
            '{"content": "x", "layer": "user", "identifiers": {"user_id": "u"}, "metadata": [1]}',
            None,
        ),
        ('{"id": "", "content": "x", "layer": "user", "identifiers": {"user_id": "u"}}', "id"),
    ],
)
def test_a_bad_line_imports_nothing_and_names_the_line(
    ms: Lamina, tmp_path: Path, record: str, field: str | None
) -> None:
    ms.memory.add("kept", layer="user", user_id="u")
    good = '{"content": "fine", "layer": "user", "identifiers": {"user_id": "u"}}'
    path = write(tmp_path / "bad.jsonl", [good, "", record, good])
    with pytest.raises(LaminaError) as err:
        ms.memory.import_(path)
    assert err.value.code in (
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.INVALID_LAYER,
        ErrorCode.MISSING_IDENTIFIER,
    )
    assert err.value.details["line"] == 3 and "line 3" in err.value.message
    if field is not None:
        assert err.value.details["field"] == field
    assert [r["content"] for r in ms.memory.export()] == ["kept"]


def test_import_arguments_are_checked(ms: Lamina, tmp_path: Path) -> None:
    for call, code in [
        (lambda: ms.memory.import_(tmp_path / "absent.jsonl"), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.import_([], format="csv"), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.import_([], batch_size=0), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.import_([42]), ErrorCode.INVALID_ARGUMENT),
        (lambda: list(ms.memory.export(embeddings="yes")), ErrorCode.INVALID_ARGUMENT),
        (lambda: list(ms.memory.export(layers=["moon"])), ErrorCode.INVALID_LAYER),
    ]:
        with pytest.raises(LaminaError) as err:
            call()
        assert err.value.code is code
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(LaminaError) as err:
        ms.memory.import_(binary)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    report = ms.memory.import_(
        [{"content": "from a dict", "layer": "user", "identifiers": {"user_id": "u"}}]
    )
    assert report.imported == 1
    # Records without ids get the same id each time: importing them again adds nothing.
    again = ms.memory.import_(
        [{"content": "from a dict", "layer": "user", "identifiers": {"user_id": "u"}}]
    )
    assert (again.imported, again.skipped) == (0, 1)


def test_import_runs_the_write_guard(ms: Lamina, tmp_path: Path) -> None:
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    path = write(
        tmp_path / "secret.jsonl",
        [
            '{"content": "fine", "layer": "project", "identifiers": {"project_id": "p"}}',
            json.dumps(
                {"content": f"key {key}", "layer": "project", "identifiers": {"project_id": "p"}}
            ),
        ],
    )
    with pytest.raises(LaminaError) as err:
        ms.memory.import_(path)
    assert err.value.code is ErrorCode.POLICY_VIOLATION and err.value.details["line"] == 2
    assert lines(ms) == []


MEM0 = [
    {
        "id": "6f1c0a52-5d53-4a43-9d0b-0c3f1b7d9e01",
        "memory": "Likes hiking in the Alps",
        "hash": "0b1c",
        "metadata": {"source": "chat"},
        "categories": ["hobbies"],
        "created_at": "2024-07-20T01:23:45.123456-07:00",
        "updated_at": None,
        "user_id": "alex",
    },
    {
        "id": "7a2d1b63-6e64-4b54-8e1c-1d4a2c8e0f12",
        "memory": "Prefers answers in German",
        "created_at": "2024-07-21T08:00:00+00:00",
        "updated_at": "2024-07-22T08:00:00+00:00",
        "user_id": "alex",
        "agent_id": "helper",
    },
    {
        "id": "8b3e2c74-7f75-4c65-9f2d-2e5b3d9f1a23",
        "memory": "Asked about train times",
        "user_id": "alex",
        "run_id": "run-9",
        "created_at": "2024-07-23T08:00:00Z",
    },
]


def test_mem0_import(ms: Lamina, tmp_path: Path) -> None:
    document = tmp_path / "mem0.json"
    document.write_text(json.dumps({"results": MEM0}), encoding="utf-8")
    report = ms.memory.import_(document, format="mem0")
    assert (report.imported, report.embedded) == (3, 3)
    got = {r["id"]: r for r in ms.memory.export()}
    hiking = got[MEM0[0]["id"]]
    assert hiking["layer"] == "user" and hiking["identifiers"] == {"user_id": "alex"}
    assert hiking["content"] == "Likes hiking in the Alps"
    assert hiking["metadata"] == {
        "source": "chat",
        "mem0": {"hash": "0b1c", "categories": ["hobbies"]},
    }
    assert hiking["created_at"] == hiking["updated_at"] == "2024-07-20T08:23:45.123456Z"
    assert got[MEM0[1]["id"]]["layer"] == "agent"
    assert got[MEM0[2]["id"]]["identifiers"] == {"session_id": "run-9", "user_id": "alex"}
    # The same memories as JSON Lines, or a plain list: nothing new.
    jsonl = write(tmp_path / "mem0.jsonl", [json.dumps(m) for m in MEM0])
    assert ms.memory.import_(jsonl, format="mem0").skipped == 3
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(MEM0), encoding="utf-8")
    assert ms.memory.import_(listed, format="mem0").skipped == 3
    orphan = write(
        tmp_path / "orphan.jsonl", [json.dumps({"id": "x", "memory": "m", "agent_id": "a"})]
    )
    with pytest.raises(LaminaError) as err:
        ms.memory.import_(orphan, format="mem0")
    assert err.value.details == {"field": "user_id", "line": 1}


def test_a_checked_record_reads_back_the_same_without_its_checks(ms: Lamina) -> None:
    """The importer's second pass skips the checks of lines it checked (same CRC): what it
    builds must equal what the checked pass built."""
    from lamina.memory.records import parse_line, parse_record

    fill(ms)
    ms.memory.add("tags", layer="user", user_id="t", metadata={"tags": ["a", "a", "b"]})

    model = ms.memory.embedding_status().model

    def parse(record: dict[str, Any], n: int, checked: bool) -> Any:
        return parse_record(
            record, n, tenant_id="x", max_length=1000, model=model, dimensions=384, checked=checked
        )

    for n, line in enumerate(lines(ms, embeddings=True, history=True), start=1):
        record = parse_line(line, n)
        if n == 2:
            del record["id"]  # a derived id
        if n == 3:
            record["event_at"] = "2024-05-01T10:00:00+02:00"
            record["expires_at"] = "2030-01-01T00:00:00"
        if n == 4:
            del record["embedding_model"]  # a field left out: defaulted
            record["updated_at"] = "2031-02-03T04:05:06.000007+00:00"
        if n == 5:
            del record["updated_at"]
        fast, full = parse(record, n, checked=True), parse(record, n, checked=False)
        assert fast.entry == full.entry
        assert fast.entry.model_dump() == full.entry.model_dump()
        assert fast.entry.model_fields_set == full.entry.model_fields_set
        assert fast.history == full.history and fast.history
        if n == 4:  # a vector of no named model is not kept: the importer embeds
            assert fast.vector is None and full.vector is None
        else:
            assert full.vector is not None and np.array_equal(fast.vector, full.vector)


def test_the_garbage_collector_pauses_while_imports_run(ms: Lamina, tmp_path: Path) -> None:
    """An import turns Python's cyclic garbage collector off while it runs (its batches'
    objects made the collector traverse the whole process again and again) and back on
    when it ends, however it ends; with imports overlapping, when the last one ends; and a
    collector the application had turned off stays off."""
    path = tmp_path / "rows.jsonl"
    record = {"content": "note", "layer": "user", "identifiers": {"user_id": "u"}}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    seen: list[bool] = []
    assert gc.isenabled()
    report = ms.memory.import_(path, on_progress=lambda *_: seen.append(gc.isenabled()))
    assert report.imported == 1 and seen and not any(seen) and gc.isenabled()

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "x", "layer": "nowhere", "identifiers": {}}\n', encoding="utf-8")
    with pytest.raises(LaminaError):
        ms.memory.import_(bad)
    assert gc.isenabled()

    with transfer._collector_paused():
        with transfer._collector_paused():  # another import, overlapping
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()

    gc.disable()
    try:
        ms.memory.import_(path)
        assert not gc.isenabled()
    finally:
        gc.enable()
