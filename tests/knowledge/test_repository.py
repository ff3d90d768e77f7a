"""ms.knowledge: the git repository, its index, statuses, history, diff, safety."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from dulwich.objects import Blob, Commit
from dulwich.repo import Repo

from lamina import ErrorCode, Lamina, LaminaError
from lamina.knowledge.gitstore import BRANCH
from tests.conftest import fast_settings

GIT = shutil.which("git")


def repo_dir(ms: Lamina, tenant: str = "default") -> Path:
    return ms.aio.knowledge.git.directory(tenant)


def git(ms: Lamina, *args: str) -> str:
    """The real git binary reads what dulwich wrote (tests only; run time needs no git)."""
    if GIT is None:
        pytest.skip("git is not installed")
    out = subprocess.run(
        [GIT, "--git-dir", str(repo_dir(ms)), *args], check=True, capture_output=True, text=True
    )
    return out.stdout


def external_commit(ms: Lamina, files: dict[str, bytes | None], message: str) -> str:
    """A change made outside lamina (a reviewer's merge, a push): a plain git commit."""
    from dulwich.object_store import commit_tree_changes

    repo = Repo(str(repo_dir(ms)))
    try:
        head = repo.refs[BRANCH]
        parent = repo.object_store[head]
        assert isinstance(parent, Commit)
        changes: list[Any] = []
        for path, data in files.items():
            if data is None:
                changes.append((path.encode(), None, None))
            else:
                blob = Blob.from_string(data)
                repo.object_store.add_object(blob)
                changes.append((path.encode(), 0o100644, blob.id))
        commit = Commit()
        commit.tree = commit_tree_changes(repo.object_store, parent.tree, changes)
        commit.parents = [head]
        commit.author = commit.committer = b"Reviewer <reviewer@example.com>"
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = message.encode()
        repo.object_store.add_object(commit)
        assert repo.refs.set_if_equals(BRANCH, head, commit.id)
        return commit.id.decode()
    finally:
        repo.close()


def adr(ms: Lamina, title: str = "Use PostgreSQL", **kw: Any) -> Any:
    kw.setdefault("layer", "team")
    kw.setdefault("layer_id", "platform")
    return ms.knowledge.create("adr", title, **kw)


def test_create_get_update_status_history_diff(ms: Lamina) -> None:
    created = adr(
        ms,
        summary="Every service keeps its data in PostgreSQL.",
        body="## Context\nWe need one database.\n",
        tags=["db", "storage"],
        constraints=["no other databases"],
        author="alice",
        message="ADR: PostgreSQL",
    )
    item = created.item
    assert item.id == "adr-0001" and item.status == "draft" and item.authors == ["alice"]
    assert item.path == "teams/platform/adrs/adr-0001.md"
    assert created.commit == ms.aio.knowledge.git.head("default")

    got = ms.knowledge.get("adr-0001")
    assert got.title == "Use PostgreSQL" and got.body == "## Context\nWe need one database.\n"
    assert got.tags == ["db", "storage"] and got.constraints == ["no other databases"]

    ms.knowledge.update("adr-0001", summary="All services use PostgreSQL 15+.", author="bob")
    ms.knowledge.set_status("adr-0001", "proposed", author="carol")
    done = ms.knowledge.set_status("adr-0001", "accepted", author="dave", message="Approved")
    assert done.item.status == "accepted" and done.item.authors == ["alice", "bob"]

    history = ms.knowledge.history("adr-0001")
    assert [h.author.split(" <")[0] for h in history] == ["dave", "carol", "bob", "alice"]
    assert [h.status for h in history] == ["accepted", "proposed", "draft", "draft"]
    assert history[0].message == "Approved" and history[-1].message == "ADR: PostgreSQL"
    record = ms.knowledge.get("adr-0001", history=True)
    assert record.item.status == "accepted" and len(record.history) == 4

    diff = ms.knowledge.diff("adr-0001")
    assert "-status: proposed" in diff.diff and "+status: accepted" in diff.diff
    full = ms.knowledge.diff("adr-0001", from_commit=history[-1].commit)
    assert "-summary: Every service" in full.diff and "+summary: All services" in full.diff

    # What landed is plain git: the real binary reads the commits, authors and file.
    log = git(ms, "log", "--format=%an|%s", "main")
    assert log.splitlines()[0] == "dave|Approved"
    assert len(log.splitlines()) == 4
    shown = git(ms, "show", "main:teams/platform/adrs/adr-0001.md")
    assert shown.startswith("---\nid: adr-0001\ntype: adr\nlayer: team\nlayer_id: platform\n")
    assert "manifest.yaml" in git(ms, "ls-tree", "--name-only", "main")
    git(ms, "fsck", "--strict")


def test_status_transitions(ms: Lamina) -> None:
    allowed = {
        "draft": {"proposed", "rejected"},
        "proposed": {"accepted", "rejected"},
        "accepted": {"deprecated", "superseded"},
        "deprecated": set(),
        "superseded": set(),
        "rejected": set(),
    }
    paths = {
        "draft": [],
        "proposed": ["proposed"],
        "accepted": ["proposed", "accepted"],
        "deprecated": ["proposed", "accepted", "deprecated"],
        "rejected": ["rejected"],
    }
    successor = adr(ms, "Successor", status="accepted").item.id
    for start, steps in paths.items():
        for target in allowed:
            item = adr(ms, f"{start} to {target}").item
            for step in steps:
                ms.knowledge.set_status(item.id, step)
            kw = {"superseded_by": successor} if target == "superseded" else {}
            if target in allowed[start]:
                assert ms.knowledge.set_status(item.id, target, **kw).item.status == target
            else:
                with pytest.raises(LaminaError) as err:
                    ms.knowledge.set_status(item.id, target, **kw)
                assert err.value.code is ErrorCode.INVALID_TRANSITION
                assert ms.knowledge.get(item.id).status == (steps[-1] if steps else "draft")

    old = adr(ms, "Old", status="accepted").item.id
    ms.knowledge.set_status(old, "superseded", superseded_by=successor)
    assert ms.knowledge.get(old).superseded_by == successor
    assert old in ms.knowledge.get(successor).supersedes
    with pytest.raises(LaminaError) as err:
        ms.knowledge.create("adr", "x", layer="company", status="deprecated")
    assert err.value.code is ErrorCode.INVALID_TRANSITION


def test_list_and_search_filters_and_pages(ms: Lamina) -> None:
    adr(ms, "Use PostgreSQL for storage", status="accepted", tags=["db"])
    adr(ms, "Use Redis for rate limits", status="accepted", tags=["cache"], layer_id="edge")
    ms.knowledge.create("pattern", "Retry with backoff", layer="company", status="accepted")
    ms.knowledge.create("spec", "Draft API spec", layer="project", layer_id="api")
    ms.knowledge.create(
        "policy", "No GPL", layer="org", layer_id="acme", status="proposed", tags=["legal"]
    )

    assert ms.knowledge.list().total_count == 3  # accepted by default
    assert ms.knowledge.list(status="any").total_count == 5
    assert ms.knowledge.list(status=None).total_count == 5
    assert [i.title for i in ms.knowledge.list(status="draft").items] == ["Draft API spec"]
    assert [i.id for i in ms.knowledge.list(type="pattern").items] == ["pattern-0001"]
    assert {i.layer_id for i in ms.knowledge.list(layer="team").items} == {"platform", "edge"}
    assert [i.layer_id for i in ms.knowledge.list(layer="team", layer_id="edge").items] == ["edge"]
    assert [i.id for i in ms.knowledge.list(layer="company").items] == ["pattern-0001"]
    assert [i.tags for i in ms.knowledge.list(tags=["cache", "nope"]).items] == [["cache"]]
    assert ms.knowledge.list(tags=["legal"], status="any").total_count == 1

    first = ms.knowledge.list(limit=2)
    assert len(first.items) == 2 and first.next_cursor and first.total_count == 3
    rest = ms.knowledge.list(limit=2, cursor=first.next_cursor)
    assert len(rest.items) == 1 and rest.next_cursor is None
    tagged = ms.knowledge.list(tags=["db", "cache"], limit=1)
    assert len(tagged.items) == 1 and tagged.next_cursor and tagged.total_count == 2
    assert len(ms.knowledge.list(tags=["db", "cache"], cursor=tagged.next_cursor).items) == 1

    hits = ms.knowledge.search("which database stores our data")
    assert hits[0].item.title == "Use PostgreSQL for storage"
    assert ms.knowledge.search("redis", mode="keyword")[0].item.layer_id == "edge"
    assert ms.knowledge.search("draft api", status="draft")[0].item.type == "spec"
    assert ms.knowledge.search("redis", tags=["db"], mode="keyword") == []
    assert ms.knowledge.search("storage", type="pattern", mode="keyword") == []
    assert all(h.item.status == "accepted" for h in ms.knowledge.search("anything"))


def test_index_follows_commits_made_outside(ms: Lamina) -> None:
    item = adr(ms, "Use PostgreSQL", status="accepted").item
    data = ms.aio.knowledge.git.read("default", item.path, ms.aio.knowledge.git.head("default"))
    assert data is not None
    edited = data.replace(b"title: Use PostgreSQL", b"title: Use PostgreSQL everywhere")
    new_file = data.replace(b"id: adr-0001", b"id: adr-0777").replace(
        b"title: Use PostgreSQL", b"title: Adopt Kubernetes for deployment"
    )
    head = external_commit(
        ms,
        {item.path: edited, "teams/platform/adrs/adr-0777.md": new_file},
        "Reviewer edits",
    )
    # The index was behind: the next read catches up, and records the commit it reflects.
    assert ms.knowledge.get("adr-0001").title == "Use PostgreSQL everywhere"
    assert ms.knowledge.search("kubernetes deployment")[0].item.id == "adr-0777"
    state = ms._run(ms.aio.knowledge.index.state("default"))
    assert state is not None and state["commit"] == head

    external_commit(ms, {"teams/platform/adrs/adr-0777.md": None}, "Remove adr-0777")
    assert [i.id for i in ms.knowledge.list().items] == ["adr-0001"]
    with pytest.raises(LaminaError) as err:
        ms.knowledge.get("adr-0777")
    assert err.value.code is ErrorCode.ITEM_NOT_FOUND

    # Bad front matter committed by hand: the error names the file and the field; the rest
    # of the repository stays readable and health lists the file.
    bad = data.replace(b"status: accepted", b"status: maybe")
    external_commit(ms, {item.path: bad}, "Broken edit")
    assert ms.knowledge.list().total_count == 0
    with pytest.raises(LaminaError) as err:
        ms.knowledge.get("adr-0001")
    assert err.value.code is ErrorCode.ITEM_NOT_FOUND
    health = ms.health()["knowledge"]
    assert health["invalid_files"][0]["path"] == item.path
    assert health["invalid_files"][0]["field"] == "status"
    external_commit(ms, {item.path: data}, "Fix")
    assert ms.knowledge.get("adr-0001").status == "accepted"
    assert ms.health()["knowledge"]["invalid_files"] == []


def test_full_rebuild_and_restart(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        for i in range(12):
            adr(ms, f"Decision number {i} about caching", status="accepted")
        before = [i.id for i in ms.knowledge.list(limit=100).items]
        # Wipe the index rows: a full rebuild restores them from git.
        for item_id in before:
            ms._run(ms.aio.knowledge.index.remove("default", item_id))
        result = ms.knowledge.rebuild()
        assert result["full"] and result["indexed"] == 12
        assert [i.id for i in ms.knowledge.list(limit=100).items] == before
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.knowledge.list().total_count == 12
        assert ms.knowledge.search("caching decision", limit=3)[0].score > 0


@pytest.mark.parametrize(
    "call",
    [
        lambda ms: ms.knowledge.create("adr", "x", layer="team", layer_id="../../etc"),
        lambda ms: ms.knowledge.create("adr", "x", layer="team", layer_id="a/b"),
        lambda ms: ms.knowledge.create("adr", "x", layer="company", id="../escape"),
        lambda ms: ms.knowledge.create("adr", "x", layer="company", id="..hidden"),
        lambda ms: ms.knowledge.create("adr", "x", layer="company", id="/etc/passwd"),
        lambda ms: ms.knowledge.create("adr", "x", layer="company", id=".git"),
        lambda ms: ms.knowledge.create("adr", "x", layer="company", id="a\\b"),
        lambda ms: ms.knowledge.get("../manifest"),
        lambda ms: ms.knowledge.update("../../x", title="y"),
        lambda ms: ms.knowledge.set_status("x/../../y", "proposed"),
        lambda ms: ms.knowledge.history("..\x00"),
        lambda ms: ms.knowledge.promotions.get("../../HEAD"),
        lambda ms: ms.knowledge.promotions.decide("../x", "reject"),
        lambda ms: ms.knowledge.create("adr", "x", layer="team", layer_id="t", related=["../a"]),
    ],
)
def test_paths_never_leave_the_repository(ms: Lamina, call: Any) -> None:
    adr(ms, "Existing")
    head = ms.aio.knowledge.git.head("default")
    before = sorted(p for p in repo_dir(ms).parent.parent.rglob("*"))
    with pytest.raises(LaminaError) as err:
        call(ms)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert ms.aio.knowledge.git.head("default") == head
    assert sorted(p for p in repo_dir(ms).parent.parent.rglob("*")) == before


def test_bad_input_names_the_field(ms: Lamina) -> None:
    cases: list[tuple[Any, ErrorCode, str | None]] = [
        (
            lambda: ms.knowledge.create("memo", "x", layer="company"),
            ErrorCode.INVALID_ARGUMENT,
            "type",
        ),
        (lambda: ms.knowledge.create("adr", "x", layer="galaxy"), ErrorCode.INVALID_LAYER, None),
        (lambda: ms.knowledge.create("adr", "x", layer="team"), ErrorCode.MISSING_IDENTIFIER, None),
        (
            lambda: ms.knowledge.create("adr", "x", layer="company", layer_id="c"),
            ErrorCode.INVALID_ARGUMENT,
            "layer_id",
        ),
        (
            lambda: ms.knowledge.create("adr", "  ", layer="company"),
            ErrorCode.INVALID_ARGUMENT,
            "title",
        ),
        (
            lambda: ms.knowledge.create("adr", "x", layer="company", tags="db"),
            ErrorCode.INVALID_ARGUMENT,
            "tags",
        ),
        (
            lambda: ms.knowledge.create("adr", "x", layer="company", body="x" * 70_000),
            ErrorCode.CONTENT_TOO_LONG,
            "body",
        ),
        (
            lambda: ms.knowledge.create("adr", "x", layer="company", severity="fatal"),
            ErrorCode.INVALID_ARGUMENT,
            "severity",
        ),
        (
            lambda: ms.knowledge.create("adr", "x", layer="company", mode="mandatory"),
            ErrorCode.INVALID_ARGUMENT,
            None,
        ),
        (
            lambda: ms.knowledge.create(
                "policy", "p", layer="company", rules=[{"id": "r", "target": "code"}]
            ),
            ErrorCode.INVALID_ARGUMENT,
            "rules",
        ),
        (
            lambda: ms.knowledge.create(
                "policy",
                "p",
                layer="company",
                rules=[{"id": "r", "target": "code", "operator": "must_match", "value": "("}],
            ),
            ErrorCode.INVALID_ARGUMENT,
            "rules",
        ),
        (
            lambda: ms.knowledge.create("adr", "x", layer="company", author=""),
            ErrorCode.INVALID_ARGUMENT,
            "author",
        ),
        (lambda: ms.knowledge.update("adr-9999", title="y"), ErrorCode.ITEM_NOT_FOUND, None),
        (lambda: ms.knowledge.update("adr-0001"), ErrorCode.INVALID_ARGUMENT, None),
        (lambda: ms.knowledge.set_status("adr-0001", "done"), ErrorCode.INVALID_ARGUMENT, "status"),
        (lambda: ms.knowledge.list(status="done"), ErrorCode.INVALID_ARGUMENT, "status"),
        (lambda: ms.knowledge.list(limit=0), ErrorCode.INVALID_ARGUMENT, "limit"),
        (lambda: ms.knowledge.list(layer_id="x"), ErrorCode.INVALID_ARGUMENT, "layer_id"),
        (lambda: ms.knowledge.search(""), ErrorCode.INVALID_ARGUMENT, None),
        (lambda: ms.knowledge.search("x" * 5000), ErrorCode.QUERY_TOO_LONG, None),
        (lambda: ms.knowledge.search("x", mode="fuzzy"), ErrorCode.INVALID_ARGUMENT, "mode"),
        (
            lambda: ms.knowledge.diff("adr-0001", from_commit="abc"),
            ErrorCode.INVALID_ARGUMENT,
            "from_commit",
        ),
        (
            lambda: ms.knowledge.diff("adr-0001", from_commit="0" * 40),
            ErrorCode.INVALID_ARGUMENT,
            None,
        ),
        (lambda: adr(ms, "dup", id="adr-0001"), ErrorCode.ITEM_EXISTS, None),
    ]
    adr(ms, "First")
    head = ms.aio.knowledge.git.head("default")
    for n, (call, code, field) in enumerate(cases):
        with pytest.raises(LaminaError) as err:
            call()
        assert err.value.code is code, (n, err.value, code)
        if field is not None:
            assert err.value.details.get("field") == field, err.value
    assert ms.aio.knowledge.git.head("default") == head
    assert ms.knowledge.get("adr-0001").title == "First"


def test_tenants_have_separate_repositories(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        adr(ms, "A's decision", status="accepted", tenant_id="a")
        adr(ms, "B's decision", status="accepted", tenant_id="b")
        assert [i.title for i in ms.knowledge.list(tenant_id="a").items] == ["A's decision"]
        assert [h.item.title for h in ms.knowledge.search("decision", tenant_id="b")] == [
            "B's decision"
        ]
        # Same id in both tenants, each its own item.
        assert ms.knowledge.get("adr-0001", tenant_id="a").title == "A's decision"
        assert ms.knowledge.get("adr-0001", tenant_id="b").title == "B's decision"
        with pytest.raises(LaminaError):
            ms.knowledge.get("adr-0001", tenant_id="c")
        assert ms.aio.knowledge.git.directory("a") != ms.aio.knowledge.git.directory("b")
        odd = ms.aio.knowledge.git.directory("../weird tenant")
        assert odd.parent == ms.aio.knowledge.git.root


WRITER = """
import sys
from lamina import Lamina
from tests.conftest import fast_settings
from pathlib import Path
with Lamina(fast_settings(Path(sys.argv[1]))) as ms:
    for i in range(int(sys.argv[3])):
        ms.knowledge.create("pattern", f"{sys.argv[2]} pattern {i}", layer="company",
                            id=f"{sys.argv[2]}-{i}", author=sys.argv[2])
"""


def test_two_writer_processes_lose_no_commit(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        adr(ms, "Seed")
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(data_dir), name, "8"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("alpha", "beta")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()[-2000:]
    with Lamina(fast_settings(data_dir)) as ms:
        ids = {i.id for i in ms.knowledge.list(type="pattern", status="draft", limit=100).items}
        assert ids == {f"{n}-{i}" for n in ("alpha", "beta") for i in range(8)}
        authors = [line.split("|")[0] for line in git(ms, "log", "--format=%an|%s").splitlines()]
        assert len(authors) == 17 and authors.count("alpha") == 8 and authors.count("beta") == 8
        git(ms, "fsck", "--strict")


def test_threads_of_one_process_lose_no_commit(ms: Lamina) -> None:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(
            pool.map(lambda i: ms.knowledge.create("spec", f"Spec {i}", layer="company"), range(12))
        )
    items = ms.knowledge.list(status="draft", limit=100).items
    assert sorted(i.id for i in items) == [f"spec-{i:04d}" for i in range(1, 13)]
    assert len(ms.knowledge.history("spec-0001")) == 1


def test_health_shows_a_missing_or_corrupt_repository(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.health()["knowledge"]["status"] == "empty"
        assert ms.health()["healthy"]
        adr(ms, "One")
        health = ms.health()
        assert health["healthy"] and health["knowledge"]["status"] == "ok"
        path = repo_dir(ms)
    # Corrupt: the branch points at an object that is not there.
    (path / "refs" / "heads" / "main").write_text("0123456789abcdef0123456789abcdef01234567\n")
    with Lamina(fast_settings(data_dir)) as ms:
        health = ms.health()
        assert not health["healthy"] and health["knowledge"]["status"] == "corrupt"
    # Missing: the index remembers a commit but the repository is gone.
    shutil.rmtree(path)
    with Lamina(fast_settings(data_dir)) as ms:
        health = ms.health()
        assert not health["healthy"] and health["knowledge"]["status"] == "missing"


def test_content_fields_are_declared_once_and_checked(ms: Lamina) -> None:
    """create and update share their content keywords (lamina.knowledge.fields.ItemFields):
    each one given reaches the item, an unknown one is a TypeError and commits nothing."""
    with pytest.raises(TypeError, match="create\\(\\) got an unexpected keyword argument 'sumary'"):
        ms.knowledge.create("adr", "Typo", layer="company", sumary="x")
    assert ms.knowledge.list(status="any").total_count == 0
    made = ms.knowledge.create(
        "policy", "Pinned", layer="company", summary="s", body="b", tags=["t"],
        constraints=["c"], related=[], mode="mandatory", rules=[],
    ).item  # fmt: skip
    assert (made.summary, made.body, made.tags, made.constraints) == ("s", "b", ["t"], ["c"])
    assert (made.severity.value, made.mode.value, made.authors) == ("info", "mandatory", ["lamina"])
    with pytest.raises(TypeError, match="'titel'"):
        ms.knowledge.update(made.id, titel="x")
    changed = ms.knowledge.update(made.id, severity="warn", merge_strategy="override").item
    assert (changed.severity.value, changed.merge_strategy.value, changed.summary) == (
        "warn",
        "override",
        "s",
    )


def test_list_and_search_share_their_filters(ms: Lamina) -> None:
    """list and search take the same filters (lamina.knowledge.fields.ItemFilters): status
    accepted unless given, None or "any" for all; an unknown filter is a TypeError."""
    ms.knowledge.create("adr", "Use PostgreSQL", layer="company", tags=["db"])
    assert ms.knowledge.list().total_count == 0  # a draft: not accepted
    assert ms.knowledge.list(status=None).total_count == 1
    assert ms.knowledge.list(status="any", tags=["db"], type="adr").total_count == 1
    assert [h.item.title for h in ms.knowledge.search("postgres", status="draft")] == [
        "Use PostgreSQL"
    ]
    assert ms.knowledge.search("postgres") == []
    for call in (ms.knowledge.list, lambda **kw: ms.knowledge.search("postgres", **kw)):
        with pytest.raises(TypeError, match="'kind'"):
            call(kind="adr")
