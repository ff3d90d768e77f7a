"""The web inspector over HTTP, against a real server on 127.0.0.1: signing in, tenants, CSRF
and Origin checks, escaping, security headers, pagination, edits and deletes, delete-all
with its count, export, the prompt preview, sessions, knowledge, governance and the server
page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lamina.observational.ports import NewNote
from lamina.runtime import AsyncLamina
from lamina.server.app import LaminaServer
from tests.server.harness import Running, running_server, server_settings
from tests.server.ui_support import (
    KEY_ACME,
    KEY_ADMIN,
    KEY_GLOBEX,
    NO_REQUESTS,
    csrf_of,
    memory_ids,
    sign_in,
    ui_settings,
)

XSS = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_server(ui_settings(tmp_path_factory.mktemp("ui") / "data")) as running:
        yield running


@pytest.fixture(scope="module")
def acme(live: Running) -> Iterator[httpx.Client]:
    with sign_in(live.url, KEY_ACME) as client:
        yield client


@pytest.fixture(scope="module")
def globex(live: Running) -> Iterator[httpx.Client]:
    with sign_in(live.url, KEY_GLOBEX) as client:
        yield client


def _add(live: Running, content: str, user: str, tenant: str = "acme", **extra: object) -> str:
    entry = live.run(
        live.server.ms.memory.add(content, layer="user", user_id=user, tenant_id=tenant, **extra)
    )
    return str(entry.id)


def test_pages_need_a_signed_in_key_and_the_cookie_is_locked_down(live: Running) -> None:
    with httpx.Client(base_url=live.url, headers={"origin": live.url}) as anon:
        page = anon.get("/ui/memories?user_id=x")
        assert page.status_code == 303
        assert page.headers["location"] == "/ui/login?next=/ui/memories%3Fuser_id%3Dx"
        cookie = page.headers["set-cookie"].lower()
        for flag in ("httponly", "samesite=strict", "path=/ui"):
            assert flag in cookie
        form = anon.get("/ui/login")
        wrong = anon.post("/ui/login", data={"key": "ms_nope", "csrf": csrf_of(form.text)})
        assert wrong.status_code == 401 and "not a configured API key" in wrong.text
        assert anon.get("/ui/memories").status_code == 303
    with httpx.Client(base_url=live.url, cookies={"lamina_ui": "eyJrIjoiZm9vIn0.bad"}) as forged:
        assert forged.get("/ui/memories").status_code == 303
    with httpx.Client(base_url=live.url, headers={"origin": live.url}) as anon:
        # An API key in a header does not sign anyone in to the pages.
        keyed = anon.get("/ui/memories", headers={"authorization": f"Bearer {KEY_ACME}"})
        assert keyed.status_code == 303
    with sign_in(live.url, KEY_ACME) as client:
        page = client.get("/ui/memories")
        assert page.status_code == 200 and "tenant <strong>acme</strong>" in page.text
        out = client.post("/ui/logout", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 303
        assert client.get("/ui/memories").status_code == 303


def test_sign_in_goes_back_only_to_inspector_pages(live: Running) -> None:
    for target, expected in (
        ("/ui/search?q=x", "/ui/search?q=x"),
        ("https://evil.example/", "/ui/memories"),
        ("//evil.example/ui/x", "/ui/memories"),
    ):
        with httpx.Client(base_url=live.url, headers={"origin": live.url}) as client:
            form = client.get("/ui/login")
            done = client.post(
                "/ui/login", data={"key": KEY_ACME, "csrf": csrf_of(form.text), "next": target}
            )
            assert done.headers["location"] == expected


def test_a_tenant_sees_only_its_own_memories(
    live: Running, acme: httpx.Client, globex: httpx.Client
) -> None:
    mid = _add(live, "acme's secret plan: tea at noon", "alice")
    mine = acme.get("/ui/memories?user_id=alice")
    assert mid in memory_ids(mine.text)
    theirs = globex.get("/ui/memories?user_id=alice")
    assert theirs.status_code == 200 and memory_ids(theirs.text) == []
    assert "tea at noon" not in globex.get("/ui/search?user_id=alice&q=secret+plan").text
    assert globex.get(f"/ui/memories/{mid}").status_code == 404
    page = globex.get("/ui/memories?user_id=bob")
    edit = globex.post(
        f"/ui/memories/{mid}/edit", data={"csrf": csrf_of(page.text), "content": "pwned"}
    )
    assert edit.status_code == 404
    gone = globex.post(f"/ui/memories/{mid}/delete", data={"csrf": csrf_of(page.text)})
    assert gone.status_code == 404
    count = globex.get("/ui/memories/delete-all?user_id=alice")
    assert "0 memories would be deleted" in count.text
    assert globex.get("/ui/memories/export.jsonl?user_id=alice").text == ""
    assert "secret plan" in acme.get(f"/ui/memories/{mid}").text


def test_state_changing_requests_need_the_session_token_and_this_origin(
    live: Running, acme: httpx.Client
) -> None:
    mid = _add(live, "original text", "carol")
    page = acme.get(f"/ui/memories/{mid}")
    token = csrf_of(page.text)
    url = f"/ui/memories/{mid}/edit"
    cases = [
        ({"content": "no token"}, {}),
        ({"content": "wrong token", "csrf": "x" * 32}, {}),
        ({"content": "cross-site", "csrf": token}, {"origin": "https://evil.example"}),
        ({"content": "null origin", "csrf": token}, {"origin": "null"}),
    ]
    for data, headers in cases:
        refused = acme.post(url, data=data, headers=headers)
        assert refused.status_code == 403, data
        assert "UNAUTHORIZED" in refused.text
    # No Origin, no Referer: refused too; a Referer of this server is enough.
    with httpx.Client(base_url=live.url, cookies=acme.cookies) as bare:
        assert bare.post(url, data={"content": "bare", "csrf": token}).status_code == 403
        ok = bare.post(
            url,
            data={"content": "via referer", "csrf": token},
            headers={"referer": f"{live.url}/ui/memories/{mid}"},
        )
        assert ok.status_code == 303
    # Another session's token does not do.
    with sign_in(live.url, KEY_ACME) as other:
        theirs = csrf_of(other.get("/ui/memories").text)
        assert acme.post(url, data={"content": "x", "csrf": theirs}).status_code == 403
    stored = live.run(live.server.ms.memory.get(mid, tenant_id="acme"))
    assert stored.content == "via referer"


def test_every_value_is_escaped(live: Running, acme: httpx.Client) -> None:
    mid = _add(live, XSS, "mallory", metadata={"tags": [XSS], XSS: XSS})
    pages = [
        acme.get("/ui/memories?user_id=mallory").text,
        acme.get(f"/ui/memories/{mid}").text,
        acme.get("/ui/search?user_id=mallory&q=alert&mode=keyword&threshold=0").text,
        acme.get(f"/ui/memories?user_id=mallory&tags={XSS}").text,
        acme.get(f"/ui/nope?x={XSS}").text,
        acme.get(f"/ui/search?user_id={XSS}&q={XSS}").text,
    ]
    for text in pages:
        assert "<script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[2]
    exported = acme.get("/ui/memories/export.jsonl?user_id=mallory")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert json.loads(exported.text.splitlines()[0])["content"] == XSS


def test_security_headers_on_every_response(live: Running, acme: httpx.Client) -> None:
    for path in (
        "/ui/memories",
        "/ui/login",
        "/ui/static/ui.css",
        "/ui",
        "/ui/memories/nope",
        "/ui/no/such/page",
    ):
        response = acme.get(path)
        headers = response.headers
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "script-src" not in csp
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
    page = acme.get("/ui/memories").text
    assert "<script" not in page and "style=" not in page
    missing = acme.get("/ui/no/such/page")
    assert missing.status_code == 404 and "ITEM_NOT_FOUND" in missing.text


def test_the_list_pages_with_a_keyset_cursor(live: Running, acme: httpx.Client) -> None:
    ids = [_add(live, f"page fact {i}", "paula") for i in range(60)]
    seen: list[str] = []
    url = "/ui/memories?user_id=paula&limit=25"
    pages = 0
    while url:
        page = acme.get(url)
        assert page.status_code == 200
        assert f"{60 + min(pages, 1)} memories" in page.text
        found = memory_ids(page.text)
        seen += found
        pages += 1
        if pages == 1:  # a memory added meanwhile does not shift the next page
            _add(live, "late fact", "paula")
        nxt = re.search(r'href="(/ui/memories\?[^"]+)" rel="next"', page.text)
        url = nxt.group(1).replace("&amp;", "&") if nxt else ""
    assert pages == 3
    assert seen == list(reversed(ids))


def test_filters_narrow_the_list(live: Running, acme: httpx.Client) -> None:
    tagged = _add(live, "likes green tea", "tina", metadata={"tags": ["drinks"], "mood": "calm"})
    _add(live, "owns a bike", "tina")
    by_tag = memory_ids(acme.get("/ui/memories?user_id=tina&tags=drinks").text)
    assert by_tag == [tagged]
    by_meta = acme.get('/ui/memories?user_id=tina&metadata={"mood":"calm"}')
    assert memory_ids(by_meta.text) == [tagged]
    future = memory_ids(acme.get("/ui/memories?user_id=tina&since=2999-01-01T00:00").text)
    assert future == []
    bad = acme.get("/ui/memories?user_id=tina&metadata={oops")
    assert bad.status_code == 400 and "INVALID_ARGUMENT" in bad.text
    assert acme.get("/ui/memories?user_id=tina&layer=galaxy").status_code == 400
    assert acme.get("/ui/search?user_id=tina&q=tea&threshold=7").status_code == 400
    unscoped = acme.get("/ui/memories?tags=drinks")
    assert unscoped.status_code == 400 and "need identifiers" in unscoped.text


def test_search_shows_each_hits_score_parts(live: Running, acme: httpx.Client) -> None:
    _add(live, "Sam drinks oolong tea every morning", "sam")
    page = acme.get("/ui/search?user_id=sam&q=oolong+tea&mode=hybrid&threshold=0")
    assert page.status_code == 200
    assert "Sam drinks oolong tea" in page.text
    semantic = re.search(r'data-part="semantic">([0-9.]+)<', page.text)
    keyword = re.search(r'data-part="keyword">([0-9.]+)<', page.text)
    assert semantic is not None and keyword is not None
    assert float(semantic.group(1)) > 0 and float(keyword.group(1)) > 0
    keyword_only = acme.get("/ui/search?user_id=sam&q=oolong&mode=keyword&threshold=0").text
    assert 'data-part="semantic">—<' in keyword_only
    high = acme.get("/ui/search?user_id=sam&q=oolong+tea&threshold=0.9999").text
    assert "below the threshold" in high


def test_edit_and_delete_through_the_pages(live: Running, acme: httpx.Client) -> None:
    mid = _add(live, "Edna likes jazz", "edna", metadata={"source": "chat"})
    page = acme.get(f"/ui/memories/{mid}")
    token = csrf_of(page.text)
    saved = acme.post(
        f"/ui/memories/{mid}/edit",
        data={"csrf": token, "content": "Edna likes blues", "metadata": '{"mood": "happy"}'},
    )
    assert saved.status_code == 303
    after = live.run(live.server.ms.memory.get(mid, tenant_id="acme"))
    assert after.content == "Edna likes blues" and after.metadata == {"mood": "happy"}
    detail = acme.get(saved.headers["location"]).text
    assert "Saved." in detail and "by <span" in detail and "ui:ann" in detail
    assert "<del>Edna likes jazz</del>" in detail
    unchanged = acme.post(
        f"/ui/memories/{mid}/edit",
        data={"csrf": token, "content": "Edna likes blues", "metadata": '{"mood": "happy"}'},
    )
    assert unchanged.status_code == 400 and "nothing changed" in unchanged.text
    invalidated = acme.post(f"/ui/memories/{mid}/invalidate", data={"csrf": token})
    assert invalidated.status_code == 303
    stale = acme.get(f"/ui/memories/{mid}").text
    assert "invalidated" in stale and ">invalidate<" in stale
    assert mid not in memory_ids(acme.get("/ui/memories?user_id=edna").text)
    assert mid in memory_ids(acme.get("/ui/memories?user_id=edna&invalid=1").text)
    confirm = acme.get(f"/ui/memories/{mid}/delete")
    assert "Delete this memory?" in confirm.text
    deleted = acme.post(f"/ui/memories/{mid}/delete", data={"csrf": token})
    assert deleted.status_code == 303
    assert live.run(live.server.ms.memory.get(mid, tenant_id="acme")) is None
    tomb = acme.get(f"/ui/memories/{mid}").text
    assert "This memory was deleted" in tomb and ">delete<" in tomb


def test_delete_all_shows_the_count_before_it_deletes(live: Running, acme: httpx.Client) -> None:
    for i in range(7):
        _add(live, f"doomed {i}", "dora")
    _add(live, "kept", "dora", tenant="globex")
    page = acme.get("/ui/memories/delete-all?user_id=dora")
    assert "7 memories would be deleted" in page.text
    done = acme.post(
        "/ui/memories/delete-all",
        data={"csrf": csrf_of(page.text), "user_id": "dora"},
    )
    assert done.status_code == 200 and "Deleted 7 memories" in done.text
    left = live.run(live.server.ms.memory.list(user_id="dora", tenant_id="globex"))
    assert left.total_count == 1
    empty = acme.post("/ui/memories/delete-all", data={"csrf": csrf_of(page.text)})
    assert empty.status_code == 400 and "MISSING_IDENTIFIER" in empty.text


def test_export_follows_the_current_filter(live: Running, acme: httpx.Client) -> None:
    for i in range(3):
        _add(live, f"exported {i}", "xena", metadata={"tags": ["keep"] if i else ["drop"]})
    text = acme.get("/ui/memories/export.jsonl?user_id=xena&tags=keep").text
    records = [json.loads(line) for line in text.splitlines()]
    assert sorted(r["content"] for r in records) == ["exported 1", "exported 2"]
    assert all(r["identifiers"] == {"user_id": "xena"} for r in records)


def test_prompt_preview_shows_sections_tokens_and_what_was_dropped(
    live: Running, acme: httpx.Client
) -> None:
    ms = live.server.ms
    _add(live, "Pat is allergic to peanuts", "pat")
    live.run(ms.sessions.append("pat-1", "user", "I cooked pasta yesterday", tenant_id="acme"))
    live.run(ms.sessions.append("pat-1", "user", "what should I cook tonight?", tenant_id="acme"))
    for i in range(60):
        text = f"Observation {i}: the user discussed recipe number {i} at length. " * 20
        live.run(ms.store.sessions.add_note("acme", "pat-1", NewNote(text, 120, 0, (0, 0))))
    page = acme.get("/ui/prompt?user_id=pat&session_key=pat-1&q=peanuts+cooking").text
    assert "## Relevant Memories" in page and "Pat is allergic to peanuts" in page
    assert "## Conversation Memory" in page
    assert re.search(r"Relevant Memories</a></th><td class=\"num\">\d+</td>", page)
    assert "Dropped observations" in page and "Observation 40:" in page
    assert "what should I cook tonight?" in page
    assert "1 recent message" in page


def test_a_sessions_kept_base_prompt_is_shown_and_starts_its_preview(
    live: Running, acme: httpx.Client, globex: httpx.Client
) -> None:
    """As every door: the preview of a session's prompt starts from the session's kept base
    system prompt when the page gives no base; a base given wins; the session page shows it
    (a session that holds only its base prompt is a session, not a 404)."""
    ms = live.server.ms
    live.run(
        ms.sessions.set_system_prompt("s-oncall", "You are the on-call bot.", tenant_id="acme")
    )
    page = acme.get("/ui/sessions/s-oncall")
    assert page.status_code == 200 and "You are the on-call bot." in page.text
    assert globex.get("/ui/sessions/s-oncall").status_code == 404
    kept = acme.get("/ui/prompt?session_key=s-oncall&q=deploy").text
    assert "You are the on-call bot." in kept and "You are a helpful assistant." not in kept
    given = acme.get("/ui/prompt?session_key=s-oncall&q=deploy&base=Be+terse.").text
    assert "Be terse." in given and "You are the on-call bot." not in given
    other = acme.get("/ui/prompt?session_key=s-other&q=deploy").text
    assert "You are a helpful assistant." in other and "on-call" not in other
    live.run(ms.sessions.append("s-chat", "user", "hi", tenant_id="acme"))
    assert "None kept" in acme.get("/ui/sessions/s-chat").text


def test_sessions_page_shows_messages_notes_and_what_waits(
    live: Running, acme: httpx.Client, globex: httpx.Client
) -> None:
    ms = live.server.ms
    for text in ("hello", "I moved to Lisbon", "and I like sardines"):
        live.run(ms.sessions.append("s-lisbon", "user", text, tenant_id="acme"))
    live.run(
        ms.store.sessions.add_note(
            "acme", "s-lisbon", NewNote("User moved to Lisbon.", 5, 0, (0, 1))
        )
    )
    listing = acme.get("/ui/sessions").text
    assert "s-lisbon" in listing
    page = acme.get("/ui/sessions/s-lisbon").text
    assert "I moved to Lisbon" in page and "User moved to Lisbon." in page
    assert "<strong>1</strong> message after the last observed one (index 1)" in page
    assert "s-lisbon" not in globex.get("/ui/sessions").text
    # Long sessions and many sessions come a page at a time, totals counted in the store.
    live.run(
        ms.sessions.append_many(
            "s-long",
            [{"role": "user", "content": f"turn {i}"} for i in range(230)],
            tenant_id="acme",
        )
    )
    first = acme.get("/ui/sessions/s-long").text
    assert "turn 99<" in first and "turn 100<" not in first and "230," in first
    assert "<strong>230</strong> messages after the last observed one" in first
    second = acme.get("/ui/sessions/s-long?start=200").text
    assert "turn 229<" in second and "turn 199<" not in second and 'rel="next"' not in second
    for i in range(101):
        live.run(ms.sessions.append(f"s-many-{i:03d}", "user", "hi", tenant_id="acme"))
    keys = acme.get("/ui/sessions").text
    assert "s-lisbon" in keys and "s-many-099" not in keys and 'rel="next"' in keys
    later = acme.get("/ui/sessions?after=s-many-097").text
    assert "s-many-098" in later and "s-many-100" in later and "s-lisbon" not in later


def test_knowledge_history_diffs_and_governance(
    live: Running, acme: httpx.Client, globex: httpx.Client
) -> None:
    ms = live.server.ms
    live.run(
        ms.knowledge.create(
            "adr",
            "Use SQLite",
            layer="company",
            status="accepted",
            tenant_id="acme",
            body="We use SQLite.",
        )
    )
    live.run(
        ms.knowledge.update("adr-0001", body="We use SQLite, then PostgreSQL.", tenant_id="acme")
    )
    live.run(
        ms.knowledge.create(
            "policy",
            "No requests",
            layer="company",
            status="accepted",
            rules=[NO_REQUESTS],
            tenant_id="acme",
        )
    )
    listing = acme.get("/ui/knowledge").text
    assert "Use SQLite" in listing and "No requests" in listing
    assert "Use SQLite" not in globex.get("/ui/knowledge").text
    item = acme.get("/ui/knowledge/adr-0001").text
    assert item.count("<li") >= 2
    assert '<span class="add">+We use SQLite, then PostgreSQL.</span>' in item
    first = re.findall(r"\?to=([0-9a-f]{40})", item)[-1]
    oldest = acme.get(f"/ui/knowledge/adr-0001?to={first}").text
    assert '<span class="add">+We use SQLite.</span>' in oldest
    gov = acme.get("/ui/governance?layer=project&layer_id=api")
    assert "No requests" in gov.text
    assert 'Defined by <a href="/ui/knowledge/policy-0001">' in gov.text
    checked = acme.post(
        "/ui/governance/validate",
        data={
            "csrf": csrf_of(gov.text),
            "layer": "project",
            "layer_id": "api",
            "dependencies": "requests\nhttpx",
        },
    )
    assert (
        checked.status_code == 200 and "Blocked" in checked.text and "no-requests" in checked.text
    )


def test_server_page_figures_for_admins_and_no_paths(live: Running, acme: httpx.Client) -> None:
    data_dir = str(live.server.ms.settings.data_dir)
    page = acme.get("/ui/server").text
    assert 'Health: <span class="status-up">up</span>' in page
    assert "need an API key of tier <code>admin</code>" in page
    with sign_in(live.url, KEY_ADMIN) as admin:
        figures = admin.get("/ui/server").text
        assert "HTTP requests by route / status" in figures and "<rect" in figures
        assert "ui / 200" in figures
    for path in ("/ui/server", "/ui/memories", "/ui/prompt?user_id=a&q=b"):
        assert data_dir not in acme.get(path).text


def test_without_keys_nobody_signs_in_but_forms_keep_their_token(tmp_path: Path) -> None:
    with (
        running_server(server_settings(tmp_path / "d")) as live,
        httpx.Client(base_url=live.url, headers={"origin": live.url}) as client,
    ):
        page = client.get("/ui/memories")
        assert page.status_code == 200 and "tenant <strong>default</strong>" in page.text
        mid = _add(live, "solo", "u", tenant="default")
        page = client.get(f"/ui/memories/{mid}")
        refused = client.post(f"/ui/memories/{mid}/edit", data={"content": "x"})
        assert refused.status_code == 403
        ok = client.post(
            f"/ui/memories/{mid}/edit", data={"content": "y", "csrf": csrf_of(page.text)}
        )
        assert ok.status_code == 303


def test_the_setting_turns_the_inspector_off_and_auto_keeps_it_to_loopback(
    tmp_path: Path,
) -> None:
    with running_server(server_settings(tmp_path / "off", ui="off")) as live:
        assert httpx.get(f"{live.url}/ui/memories").status_code == 404
    wide = ui_settings(tmp_path / "wide", host="0.0.0.0")
    assert LaminaServer(AsyncLamina(wide)).inspector is None
    forced = ui_settings(tmp_path / "forced", host="0.0.0.0", ui="on")
    assert LaminaServer(AsyncLamina(forced)).inspector is not None
