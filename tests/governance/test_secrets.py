"""The built-in secret scan: disguised secrets (lower-cased, glued to a word, split over a
line), secrets outside the content (memory metadata, knowledge tags / related, commit
messages), and the redacted form of a text."""

from __future__ import annotations

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.governance.builtin import REDACTED, redact_secrets

KEY = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "ghp_" + "a1B2" * 9


def refused(call: object) -> LaminaError:
    with pytest.raises(LaminaError) as err:
        call()  # type: ignore[operator]
    assert err.value.code is ErrorCode.POLICY_VIOLATION
    return err.value


@pytest.mark.parametrize(
    "text",
    [
        f"key {KEY.lower()} in lower case",
        f"mykey{KEY}",
        f"{KEY}glued",
        f"key {KEY[:9]}\n{KEY[9:]} split",
        f"key {KEY[:9]}  \\\n    {KEY[9:]} continued",
        f"token {TOKEN[:12]}\r\n{TOKEN[12:]}",
    ],
)
def test_disguised_secrets_are_refused(ms: Lamina, text: str) -> None:
    error = refused(lambda: ms.memory.add(text, layer="project", project_id="p"))
    assert KEY not in str(error.to_dict()) and TOKEN not in str(error.to_dict())
    assert ms.memory.list(project_id="p").total_count == 0


def test_prose_is_not_a_secret(ms: Lamina) -> None:
    for text in (
        "Southeast Asia and the Asia-Pacific region",
        "Use sk-learn for the classifier.",
        "token bucket rate limiting\nover two lines",
        "The akia tribe of asia",
    ):
        ms.memory.add(text, layer="project", project_id="p")
    assert ms.memory.list(project_id="p").total_count == 4


def test_memory_metadata_is_scanned(ms: Lamina) -> None:
    error = refused(
        lambda: ms.memory.add(
            "deploy notes", layer="team", team_id="t", metadata={"env": {"aws": KEY}}
        )
    )
    assert error.details["violations"][0]["context"]["field"] == "metadata.env.aws"
    refused(lambda: ms.memory.add("x", layer="team", team_id="t", metadata={"tags": [TOKEN]}))
    refused(lambda: ms.memory.add("x", layer="team", team_id="t", metadata={KEY: 1}))
    assert ms.memory.list(team_id="t").total_count == 0
    entry = ms.memory.add("harmless", layer="team", team_id="t", metadata={"n": 1})
    refused(lambda: ms.memory.update(entry.id, metadata={"token": TOKEN}))
    assert ms.memory.get(entry.id).metadata == {"n": 1}
    # Personal layers are not shared: metadata there is not scanned either.
    ms.memory.add("mine", layer="user", user_id="u", metadata={"aws": KEY})
    refused(
        lambda: ms.memory.add_messages(
            [{"role": "user", "name": "a", "content": "hello"}],
            project_id="p",
            metadata={"aws": KEY},
        )
    )


def test_knowledge_tags_related_and_commit_messages_are_scanned(ms: Lamina) -> None:
    first = ms.knowledge.create("spec", "Deploy", layer="company", body="fine")
    head = ms.aio.knowledge.git.head("default")
    refused(lambda: ms.knowledge.create("spec", "A", layer="company", tags=[KEY.lower()]))
    refused(lambda: ms.knowledge.create("spec", "B", layer="company", related=[TOKEN]))
    refused(lambda: ms.knowledge.create("spec", "C", layer="company", message=f"add {KEY}"))
    refused(lambda: ms.knowledge.update(first.item.id, body="new", message=f"key {TOKEN}"))
    refused(lambda: ms.knowledge.set_status(first.item.id, "proposed", message=f"x{KEY}"))
    assert ms.aio.knowledge.git.head("default") == head  # nothing committed
    assert ms.knowledge.get(first.item.id).body == "fine\n"


def test_redacted_form() -> None:
    assert redact_secrets(f"a {KEY} b") == f"a {REDACTED} b"
    assert redact_secrets(f"my{KEY.lower()}x") == f"my{REDACTED}x"
    assert redact_secrets(f"a {KEY[:8]}\n  {KEY[8:]} b") == f"a {REDACTED} b"
    assert redact_secrets(f"password = hunter2hunter2! and {TOKEN}") == (
        f"{REDACTED} and {REDACTED}"
    )
    assert redact_secrets("nothing here\nat all") == "nothing here\nat all"


def test_look_around_patterns_are_prefiltered_and_still_exact() -> None:
    """RE2 has no look-arounds: such a rule is searched with ``re`` only where the pattern
    without them matched in the RE2 pass, with the same answers."""
    from lamina.governance.models import Policy
    from lamina.governance.rules import CodeScanner, _without_lookarounds
    from lamina.knowledge.policy import Rule

    assert _without_lookarounds(r"a(?=[)(]x)b(?!c\)d)e(?<=[^]]+)f") == "abef"
    assert _without_lookarounds(r"a(?=b") is None
    value = r"\bkey(?=[0-9])\w+(?<!x)"
    rule = Rule(id="r", target="code", operator="must_not_match", value=value)
    scanner = CodeScanner([Policy(id="p", name="p", layer="company", rules=[rule])])
    assert scanner._prefilter  # the loose form went into the RE2 set
    for text, hit in (
        ("a key9abc", True),
        ("a keyabc", False),
        ("key9x", True),
        ("keyx9", False),
        ("", False),
    ):
        assert bool(scanner.scan(text)) is hit, text
