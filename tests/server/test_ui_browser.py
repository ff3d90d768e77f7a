"""The web inspector in a real browser: Debian's chromium (scripts/browser-setup installs it)
driven by Playwright against a real server on 127.0.0.1. Sign in, find a memory added
through the API, search and read its score parts, edit and delete it through the pages,
preview a prompt; another tenant sees none of it; a cross-site form post is refused; every
control is labelled and the keyboard reaches the content; with JavaScript off (signing in,
reading, searching) the pages work the same.

``LAMINA_UI_SCREENSHOTS=docs/ui`` writes a screenshot of each page there (docs/ui.md)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lamina.observational.ports import NewNote
from tests.server.harness import Running, result_of, running_server, send, tool_message
from tests.server.ui_support import KEY_ACME, KEY_ADMIN, KEY_GLOBEX, NO_REQUESTS, ui_settings

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

if not CHROMIUM.exists():
    if os.environ.get("LAMINA_REQUIRE_BROWSER"):
        raise RuntimeError("chromium is required (LAMINA_REQUIRE_BROWSER): scripts/browser-setup")
    pytest.skip("no /usr/bin/chromium: run scripts/browser-setup", allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

SHOTS = os.environ.get("LAMINA_UI_SCREENSHOTS")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_server(ui_settings(tmp_path_factory.mktemp("browser") / "data")) as running:
        _seed(running)
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield found
        found.close()


def _page(browser: Browser, live: Running, key: str, *, script: bool = True) -> Page:
    """A fresh browser context, signed in with ``key`` through the form (``script``: with
    JavaScript on; the pages need none)."""
    context = browser.new_context(
        base_url=live.url, viewport={"width": 1280, "height": 900}, java_script_enabled=script
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto("/ui/memories")
    expect(page).to_have_url(f"{live.url}/ui/login?next=/ui/memories")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{live.url}/ui/memories")
    return page


def _shot(page: Page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _api_add(live: Running, key: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """memory_add through the A2A JSON-RPC API, as an agent would call it."""
    with httpx.Client(base_url=live.url, timeout=30) as client:
        task = send(
            client,
            tool_message("memory_add", arguments),
            headers={"Authorization": f"Bearer {key}"},
        )
    found: dict[str, Any] = result_of(task)
    return found


def _seed(live: Running) -> None:
    """What the screenshots show: memories, a session with notes, knowledge, a policy."""
    ms = live.server.ms
    facts = [
        "Alice is vegetarian and allergic to peanuts",
        "Alice prefers answers in French",
        "Alice's cat is called Miso",
        "Alice moved to Lisbon in March",
    ]
    for fact in facts:
        live.run(ms.memory.add(fact, layer="user", user_id="alice", tenant_id="acme"))
    live.run(
        ms.memory.add(
            "The api project deploys on Fridays",
            layer="project",
            project_id="api",
            tenant_id="acme",
            metadata={"tags": ["ops"]},
        )
    )
    for role, text in (
        ("user", "Can you suggest a dinner for tonight?"),
        ("assistant", "How about a mushroom risotto? It has no peanuts."),
        ("user", "Great, and something with sardines for tomorrow?"),
    ):
        live.run(ms.sessions.append("alice-chat", role, text, tenant_id="acme"))
    live.run(
        ms.store.sessions.add_note(
            "acme",
            "alice-chat",
            NewNote("Alice asked for a peanut-free dinner idea.", 9, 0, (0, 1)),
        )
    )
    live.run(
        ms.store.sessions.add_note(
            "acme",
            "alice-chat",
            NewNote("Alice plans meals a day ahead and avoids peanuts.", 10, 1, (0, 1)),
        )
    )
    live.run(
        ms.knowledge.create(
            "adr",
            "Store memories in PostgreSQL at scale",
            layer="company",
            status="accepted",
            body="SQLite by default; PostgreSQL with pgvector past one machine.",
            tenant_id="acme",
        )
    )
    live.run(
        ms.knowledge.update(
            "adr-0001",
            body="SQLite by default; PostgreSQL with pgvector past one machine, sharded by tenant.",
            tenant_id="acme",
        )
    )
    live.run(
        ms.knowledge.create(
            "policy",
            "Use httpx, not requests",
            layer="company",
            status="accepted",
            rules=[NO_REQUESTS],
            tenant_id="acme",
        )
    )


def test_sign_in_and_find_a_memory_added_through_the_api(browser: Browser, live: Running) -> None:
    marker = f"Bob's locker code hint is blue-{uuid.uuid4().hex[:6]}"
    added = _api_add(live, KEY_ACME, {"content": marker, "layer": "user", "user_id": "bob"})
    page = _page(browser, live, KEY_ACME)
    _shot(page, "memories-overview")
    page.get_by_label("user_id").first.fill("bob")
    page.get_by_role("button", name="Show memories").click()
    link = page.get_by_role("link", name=marker)
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("pre.content")).to_have_text(marker)
    assert added["id"] in page.url
    page.context.close()


def test_from_a_layers_count_to_who_holds_it_and_to_their_memories(
    browser: Browser, live: Running
) -> None:
    for agent in ("chef", "travel"):
        _api_add(
            live,
            KEY_ACME,
            {
                "content": f"The {agent} agent greets Alice in French",
                "layer": "agent",
                "agent_id": agent,
                "user_id": "alice",
            },
        )
    page = _page(browser, live, KEY_ACME, script=False)
    page.get_by_role("row", name="agent").get_by_role("link").click()
    expect(page.get_by_role("heading", name="Who holds agent memories")).to_be_visible()
    _shot(page, "owners")
    page.get_by_role("link", name="travel").click()
    expect(page.get_by_role("link", name="The travel agent greets Alice in French")).to_be_visible()
    expect(page.get_by_role("link", name="The chef agent greets Alice in French")).to_have_count(0)
    # Alice's own list holds her agent memories too, and says how many each layer holds.
    page.goto("/ui/memories?user_id=alice")
    expect(page.get_by_role("link", name="The chef agent greets Alice in French")).to_be_visible()
    expect(page.locator("p.by-layer")).to_contain_text("agent 2")
    _shot(page, "memories")
    page.locator("p.by-layer").get_by_role("link", name="(whose?)").click()
    expect(page.get_by_role("heading", name="Who holds agent memories")).to_contain_text(
        "user_id=alice"
    )
    expect(page.get_by_role("link", name="chef")).to_be_visible()
    page.context.close()


def test_search_shows_the_score_parts(browser: Browser, live: Running) -> None:
    page = _page(browser, live, KEY_ACME, script=False)
    page.goto("/ui/search")
    page.get_by_label("Query").fill("peanut allergy")
    page.get_by_label("Mode").select_option("hybrid")
    page.get_by_label("Threshold").fill("0")
    page.get_by_label("user_id").first.fill("alice")
    page.get_by_role("button", name="Search", exact=True).click()
    first = page.locator("li.hit").first
    expect(first).to_contain_text("allergic to peanuts")
    semantic = float(first.locator('td[data-part="semantic"]').inner_text())
    keyword = float(first.locator('td[data-part="keyword"]').inner_text())
    assert 0 < semantic <= 1.5 and 0 < keyword <= 1.5
    score = float(first.locator("strong.score").inner_text())
    assert 0 < score <= 1
    _shot(page, "search")
    page.context.close()


def test_edit_and_delete_through_the_pages(browser: Browser, live: Running) -> None:
    added = _api_add(
        live, KEY_ACME, {"content": "Carol drinks coffee", "layer": "user", "user_id": "carol"}
    )
    page = _page(browser, live, KEY_ACME)
    page.goto(f"/ui/memories/{added['id']}")
    page.get_by_role("textbox", name="Content").fill("Carol drinks green tea")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("status")).to_contain_text("Saved.")
    expect(page.locator("pre.content")).to_have_text("Carol drinks green tea")
    expect(page.locator("ol.timeline li").first).to_contain_text("update")
    _shot(page, "memory")
    page.get_by_role("link", name="Delete this memory…").click()
    expect(page.get_by_role("heading", name="Delete this memory?")).to_be_visible()
    _shot(page, "memory-delete")
    page.get_by_role("button", name="Delete it").click()
    expect(page.get_by_role("heading", name="0 memories")).to_be_visible()
    assert live.run(live.server.ms.memory.get(added["id"], tenant_id="acme")) is None
    page.goto("/ui/memories/delete-all?user_id=alice")
    count = live.run(live.server.ms.memory.count_all(user_id="alice", tenant_id="acme"))
    assert count >= 4  # alice's facts (and agent memories, when that test ran first)
    heading = f"{count} memories would be deleted"
    expect(page.get_by_role("heading", name=heading)).to_be_visible()
    _shot(page, "delete-all")
    page.context.close()


def test_preview_a_prompt(browser: Browser, live: Running) -> None:
    page = _page(browser, live, KEY_ACME)
    page.goto("/ui/prompt")
    page.get_by_label("user_id").fill("alice")
    page.get_by_label("Session key").fill("alice-chat")
    page.get_by_label("Query").fill("what can alice eat with peanuts allergy")
    page.get_by_role("button", name="Preview the prompt").click()
    memories = page.get_by_role("region", name="Relevant Memories")
    expect(memories).to_contain_text("allergic to peanuts")
    expect(page.get_by_role("region", name="Conversation Memory")).to_contain_text("avoids peanuts")
    expect(page.locator("#assembled-h")).to_contain_text("tokens")
    _shot(page, "prompt")
    page.goto("/ui/sessions/alice-chat")
    expect(page.locator("#waiting-h")).to_be_visible()
    _shot(page, "session")
    page.context.close()


def test_another_tenant_sees_none_of_it(browser: Browser, live: Running) -> None:
    secret = _api_add(
        live, KEY_ACME, {"content": "Dan's salary is 90k", "layer": "user", "user_id": "dan"}
    )
    page = _page(browser, live, KEY_GLOBEX, script=False)
    page.goto("/ui/memories?user_id=dan")
    expect(page.get_by_role("heading", name="0 memories")).to_be_visible()
    page.goto("/ui/search?user_id=alice&q=peanuts&threshold=0")
    expect(page.get_by_role("heading", name="0 hits")).to_be_visible()
    response = page.goto(f"/ui/memories/{secret['id']}")
    assert response is not None and response.status == 404
    page.goto("/ui/sessions")
    expect(page.locator("main")).not_to_contain_text("alice-chat")
    page.goto("/ui/knowledge")
    expect(page.locator("main")).not_to_contain_text("PostgreSQL")
    assert "90k" not in page.content()
    page.context.close()


def test_a_cross_site_form_post_is_refused(browser: Browser, live: Running) -> None:
    victim = _api_add(
        live, KEY_ACME, {"content": "Erin keeps this", "layer": "user", "user_id": "erin"}
    )
    page = _page(browser, live, KEY_ACME)
    evil = (
        "<!doctype html><title>win a prize</title>"
        f'<form method="post" action="{live.url}/ui/memories/{victim["id"]}/delete">'
        '<input type="hidden" name="csrf" value="guessed"><button>Claim</button></form>'
    )
    page.context.route(
        "http://evil.test/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=evil),
    )
    page.goto("http://evil.test/prize")
    with page.expect_navigation():
        page.get_by_role("button", name="Claim").click()
    expect(page.get_by_role("alert")).to_contain_text("not sent from a page of this server")
    assert live.run(live.server.ms.memory.get(victim["id"], tenant_id="acme")) is not None
    # Even with the session's real token, a post from another origin is refused.
    page.goto(f"/ui/memories/{victim['id']}")
    token = page.locator('input[name="csrf"]').first.get_attribute("value")
    forged = page.request.post(
        f"/ui/memories/{victim['id']}/delete",
        form={"csrf": token or ""},
        headers={"Origin": "http://evil.test"},
    )
    assert forged.status == 403
    assert live.run(live.server.ms.memory.get(victim["id"], tenant_id="acme")) is not None
    page.context.close()


def test_labelled_controls_keyboard_and_the_other_pages(browser: Browser, live: Running) -> None:
    page = _page(browser, live, KEY_ADMIN)
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.close()
    page = _page(browser, live, KEY_ACME)
    unlabelled = (
        "() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]"
        ".filter(e => e.labels.length === 0).map(e => e.name)"
    )
    for path, shot in (
        ("/ui/memories?user_id=alice", None),
        ("/ui/search?user_id=alice&q=cat&threshold=0", None),
        ("/ui/prompt", None),
        ("/ui/sessions", "sessions"),
        ("/ui/knowledge", "knowledge"),
        ("/ui/knowledge/adr-0001", "knowledge-item"),
        ("/ui/governance?layer=project&layer_id=api", None),
        ("/ui/server", None),
    ):
        page.goto(path)
        assert page.evaluate(unlabelled) == [], path
        if shot:
            _shot(page, shot)
    page.goto("/ui/governance?layer=project&layer_id=api")
    page.get_by_label("Dependencies").fill("requests")
    page.get_by_role("button", name="Validate against these policies").click()
    expect(page.get_by_role("status")).to_contain_text("Blocked")
    _shot(page, "governance")
    page.context.close()
    admin = _page(browser, live, KEY_ADMIN)
    admin.goto("/ui/server")
    expect(admin.locator("svg.chart").first).to_be_visible()
    _shot(admin, "server")
    admin.context.close()
