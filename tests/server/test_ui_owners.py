"""The inspector's ways to find who holds memories, on both stores (a real server on
127.0.0.1): the per-layer counts link to who holds each layer's memories, the owners page
(tenant-scoped, a page at a time) links to each owner's memories, a user's list and the
delete-all confirmation count the same memories and say what each counts, and pages of
things that do not exist answer 404."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lamina.server.ui.owners import PAGE
from tests.pg import empty_database, require_postgres
from tests.server.harness import Running, running_server
from tests.server.ui_support import KEY_ACME, KEY_GLOBEX, memory_ids, sign_in, ui_settings


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        url = require_postgres()
        empty_database(url)
        overrides = {"database_url": url}
    data = tmp_path_factory.mktemp(f"ui-owners-{request.param}") / "data"
    with running_server(ui_settings(data, _settings=overrides)) as running:
        ms = running.server.ms

        def add(content: str, layer: str, tenant: str = "acme", **ids: Any) -> str:
            entry = running.run(ms.memory.add(content, layer=layer, tenant_id=tenant, **ids))
            return str(entry.id)

        add("Alice likes tea", "user", user_id="alice")
        moved = add("Alice lives in Berlin", "user", user_id="alice")
        running.run(ms.memory.invalidate(moved, tenant_id="acme"))
        add("The bot calls Alice 'Al'", "agent", agent_id="bot", user_id="alice")
        add("The bot answers Alice in Portuguese", "agent", agent_id="bot", user_id="alice")
        add("The helper books Alice's trains", "agent", agent_id="helper", user_id="alice")
        add("Alice asked about trains", "session", session_id="s1", user_id="alice")
        add("Alice's one-time code", "user", user_id="alice", ttl=0.5)
        add("Bob likes coffee", "user", user_id="bob")
        add("The build runs on Fridays", "project", project_id="p1")
        add("Carol of globex", "user", tenant="globex", user_id="carol")
        time.sleep(0.6)  # the one-time code expires (and is not purged yet)
        yield running


@pytest.fixture(scope="module")
def acme(live: Running) -> Iterator[httpx.Client]:
    with sign_in(live.url, KEY_ACME) as client:
        yield client


@pytest.fixture(scope="module")
def globex(live: Running) -> Iterator[httpx.Client]:
    with sign_in(live.url, KEY_GLOBEX) as client:
        yield client


def _links(page: str, path: str) -> list[str]:
    return re.findall(rf'href="/ui/{path}\?([^"]*)"', page)


def test_layer_counts_link_to_who_holds_them_and_on_to_their_memories(
    acme: httpx.Client, globex: httpx.Client
) -> None:
    overview = acme.get("/ui/memories").text
    # Every stored memory counts: alice's 3 (one invalidated, one expired) and bob's.
    assert '<a href="/ui/owners?layer=user" title="Who holds them">4</a>' in overview
    assert '<a href="/ui/owners?layer=agent" title="Who holds them">3</a>' in overview
    assert '<th scope="row">team</th><td class="num">0</td>' in overview
    users = acme.get("/ui/owners?layer=user")
    assert users.status_code == 200
    assert _links(users.text, "memories") == [
        "user_id=alice",
        "user_id=alice&amp;layer=user&amp;invalid=1",
        "user_id=bob",
        "user_id=bob&amp;layer=user&amp;invalid=1",
    ]
    assert ">3</a>" in users.text and ">1</a>" in users.text
    assert "carol" not in users.text  # another tenant's
    assert "carol" in globex.get("/ui/owners?layer=user").text
    assert "alice" not in globex.get("/ui/owners?layer=user").text
    # A user's agents, each linking to its memories.
    agents = acme.get("/ui/owners?layer=agent&user_id=alice").text
    assert "user_id=alice" in agents
    assert [x for x in dict.fromkeys(_links(agents, "memories")) if "layer=" not in x] == [
        "agent_id=bot&amp;user_id=alice",
        "agent_id=helper&amp;user_id=alice",
    ]
    bots = acme.get("/ui/memories?agent_id=bot&user_id=alice").text
    assert "The bot calls Alice" in bots and "helper" not in bots
    # Bad input: a clear error with its code.
    two = acme.get("/ui/owners?layer=user&layer=agent")
    assert two.status_code == 400 and "INVALID_ARGUMENT" in two.text
    assert "choose one layer" in two.text
    foreign = acme.get("/ui/owners?layer=user&project_id=p1")
    assert foreign.status_code == 400 and "project_id does not narrow them" in foreign.text
    cursor = acme.get("/ui/owners?layer=user&cursor=%25%25")
    assert cursor.status_code == 400 and "cursor" in cursor.text


def test_owners_come_a_page_at_a_time(live: Running, acme: httpx.Client) -> None:
    ms = live.server.ms
    items = [
        {"content": f"Visitor {i} was here", "layer": "user", "user_id": f"visitor-{i:03d}"}
        for i in range(PAGE + 1)
    ]
    live.run(ms.memory.bulk_add(items, tenant_id="globex"))
    with sign_in(live.url, KEY_GLOBEX) as globex:
        first = globex.get("/ui/owners?layer=user").text
        # In identifier order: carol, then the visitors.
        assert "carol" in first and "visitor-098" in first and "visitor-099" not in first
        (after,) = re.findall(r'href="/ui/owners\?([^"]*)" rel="next"', first)
        second = globex.get(f"/ui/owners?{after.replace('&amp;', '&')}").text
        assert "visitor-099" in second and "visitor-100" in second
        assert "carol" not in second and "visitor-098" not in second
        assert 'rel="next"' not in second and "First page" in second


def _figure(page: str, pattern: str) -> int:
    found = re.search(pattern, page)
    assert found is not None, page[:3000]
    return int(found.group(1).replace(",", ""))


def test_a_users_list_and_delete_all_count_the_same_memories(
    live: Running, acme: httpx.Client
) -> None:
    listed = acme.get("/ui/memories?user_id=alice").text
    confirm = acme.get("/ui/memories/delete-all?user_id=alice").text
    shown = _figure(listed, r'<h2 id="found">([\d,]+) memor')
    with_invalid = acme.get("/ui/memories?user_id=alice&invalid=1").text
    every = _figure(with_invalid, r'<h2 id="found">([\d,]+) memor')
    deleted = _figure(confirm, r"([\d,]+) memories would be deleted")
    count_all = live.run(live.server.ms.memory.count_all(user_id="alice", tenant_id="acme"))
    # The user's own, agent and session memories: what delete-all counts, less the
    # invalidated fact (listed when asked) and the expired code (until it is purged).
    assert (shown, every, deleted, count_all) == (5, 6, 7, 7)
    assert len(memory_ids(with_invalid)) == 6
    assert "every layer that holds them" in listed
    assert "less invalidated facts" in listed and "expired ones not purged yet" in listed
    assert re.search(r">agent 3</a>.*>user 1</a>.*>session 1</a>", listed, re.S)
    assert re.search(r">agent 3</a>.*>user 2</a>.*>session 1</a>", with_invalid, re.S)
    # The agent layer holds two agents of alice's: who they are is a link away.
    assert 'href="/ui/owners?user_id=alice&amp;layer=agent"' in listed
    assert "By layer: agent 3 · user 3 · session 1" in confirm
    assert "The memories list</a> shows 5 of them (valid now)" in confirm
    assert "1 more is invalidated" in confirm and "1 expired, waiting to be purged" in confirm
    # One layer: both figures narrow alike.
    agent_list = acme.get("/ui/memories?user_id=alice&layer=agent").text
    agent_confirm = acme.get("/ui/memories/delete-all?user_id=alice&layer=agent").text
    assert _figure(agent_list, r'<h2 id="found">([\d,]+) memor') == 3
    assert "3 memories would be deleted" in agent_confirm
    # Identifiers no one layer holds together: the layers they reach, as search sees them,
    # and the page says delete-all counts none of them.
    both = acme.get("/ui/memories?user_id=alice&project_id=p1").text
    assert "The build runs on Fridays" in both and "Alice likes tea" in both
    assert "The bot calls Alice" not in both
    assert "so this lists the layers they reach" in both and "Delete-all counts none" in both
    assert (
        "0 memories would be deleted"
        in acme.get("/ui/memories/delete-all?user_id=alice&project_id=p1").text
    )
    exported = acme.get("/ui/memories/export.jsonl?user_id=alice&project_id=p1").text
    assert "The build runs on Fridays" in exported
    everything = acme.get("/ui/memories/export.jsonl?user_id=alice").text
    assert len(everything.splitlines()) == 5 and "The bot calls Alice" in everything
    # A user nobody holds: an empty list that says so (a filter, not a missing page).
    nobody = acme.get("/ui/memories?user_id=nobody")
    assert nobody.status_code == 200 and "no memory of this tenant holds these" in nobody.text


def test_pages_of_what_does_not_exist_answer_404(live: Running, acme: httpx.Client) -> None:
    live.run(live.server.ms.sessions.append("s-real", "user", "hello", tenant_id="acme"))
    assert acme.get("/ui/sessions/s-real").status_code == 200
    for path, said in [
        ("/ui/sessions/s-unknown", "no session &#39;s-unknown&#39; in this tenant"),
        (f"/ui/memories/{uuid.uuid4()}", "in this tenant"),
        ("/ui/knowledge/adr-9999", "ITEM_NOT_FOUND"),
    ]:
        page = acme.get(path)
        assert page.status_code == 404, (path, page.status_code)
        assert "<h1>Not found</h1>" in page.text and said in page.text, page.text[:2000]
    with sign_in(live.url, KEY_GLOBEX) as globex:
        theirs = globex.get("/ui/sessions/s-real")
        assert theirs.status_code == 404 and "hello" not in theirs.text
