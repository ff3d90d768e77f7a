"""ms.governance: rule semantics, merging down the layers, validate, drift, write checks."""

from __future__ import annotations

from typing import Any

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.governance.builtin import secrets_policy
from lamina.governance.models import Policy, ValidationContext
from lamina.governance.rules import evaluate, merge
from lamina.knowledge.policy import Rule
from tests.conftest import fast_settings


def rule(target: str, operator: str, value: str = "", **kw: Any) -> Rule:
    return Rule(id=kw.pop("id", "r"), target=target, operator=operator, value=value, **kw)


def holds(r: Rule, **ctx: Any) -> bool:
    policy = Policy(id="p", name="p", layer="company", rules=[r])
    violations, applied = evaluate([policy], ValidationContext(**ctx))
    assert applied == 1
    return not violations


@pytest.mark.parametrize(
    ("r", "ctx", "ok"),
    [
        (rule("file", "must_use", "src/"), {"path": "src/app.py"}, True),
        (rule("file", "must_use", "src/"), {"path": "lib/app.py"}, False),
        (rule("file", "must_match", r"\.py$"), {"path": "a.py"}, True),
        (rule("file", "must_not_match", r"^secrets/"), {"path": "secrets/x"}, False),
        (rule("file", "must_exist", "tests/*.py"), {"path": "tests/test_a.py"}, True),
        (rule("file", "must_not_exist", "*.exe"), {"path": "tool.exe"}, False),
        (rule("code", "must_use", "logging"), {"content": "import logging\n"}, True),
        (rule("code", "must_use", "log"), {"content": "import logging\n"}, False),
        (rule("code", "must_not_use", "eval"), {"content": "x = eval(s)"}, False),
        (rule("code", "must_not_use", "eval"), {"content": "x = evaluate(s)"}, True),
        (
            rule(
                "code",
                "must_match",
                r"^# License",
            ),
            {"content": "# License: MIT"},
            True,
        ),
        (rule("code", "must_not_match", r"print\("), {"content": "print(1)"}, False),
        (rule("code", "must_exist", "SPDX-License"), {"content": "SPDX-License: MIT"}, True),
        (rule("code", "must_not_exist", "TODO"), {"content": "fine"}, True),
        (rule("dependency", "must_use", "httpx"), {"dependencies": ["httpx==0.28.1"]}, True),
        (rule("dependency", "must_not_use", "requests"), {"dependencies": ["Requests>=2"]}, False),
        (
            rule("dependency", "must_not_use", "requests"),
            {"dependencies": ["requests-oauth"]},
            True,
        ),
        (rule("dependency", "must_match", r"==\d"), {"dependencies": ["a==1", "b"]}, True),
        (rule("dependency", "must_not_match", r"^torch"), {"dependencies": ["torch"]}, False),
        (rule("dependency", "must_exist", "numpy"), {"dependencies": ["numpy"]}, True),
        (rule("import", "must_not_use", "os"), {"imports": ["os.path"]}, False),
        (rule("import", "must_not_use", "os"), {"imports": ["osmium"]}, True),
        (rule("import", "must_use", "lamina"), {"imports": ["lamina.errors"]}, True),
        (rule("import", "must_not_exist", "pickle"), {"imports": ["pickle"]}, False),
        (rule("config", "must_use", "tls.enabled"), {"config": {"tls": {"enabled": True}}}, True),
        (rule("config", "must_use", "tls.enabled"), {"config": {"tls": {"enabled": False}}}, False),
        (rule("config", "must_exist", "log.level"), {"config": {"log": {}}}, False),
        (rule("config", "must_not_exist", "debug"), {"config": {"debug": 1}}, False),
        (
            rule("config", "must_match", r"^log\.level=(info|warn)"),
            {"config": {"log": {"level": "info"}}},
            True,
        ),
        (rule("config", "must_not_match", r"^debug=True"), {"config": {"debug": True}}, False),
    ],
)
def test_each_operator_on_each_target(r: Rule, ctx: dict[str, Any], ok: bool) -> None:
    assert holds(r, **ctx) is ok


def test_rules_apply_only_to_targets_the_context_gives() -> None:
    policy = Policy(
        id="p",
        name="p",
        layer="company",
        rules=[
            rule("dependency", "must_use", "httpx", id="a"),
            rule("code", "must_use", "x", id="b"),
        ],
    )
    violations, applied = evaluate([policy], ValidationContext(path="a.py"))
    assert violations == [] and applied == 0
    # An explicitly empty list is given: must_use fails on it.
    violations, applied = evaluate([policy], ValidationContext(dependencies=[]))
    assert [v.rule_id for v in violations] == ["a"] and applied == 1


def test_allow_rules_exempt_the_policys_deny_rules_on_their_target() -> None:
    policy = Policy(
        id="no-print",
        name="No print",
        layer="company",
        rules=[
            rule("code", "must_not_match", r"print\(", id="deny-print", severity="warn"),
            Rule(id="scripts", type="allow", target="code", operator="must_match", value=r"^#!"),
        ],
    )
    violations, _ = evaluate([policy], ValidationContext(content="print(1)"))
    assert [v.rule_id for v in violations] == ["deny-print"]
    assert violations[0].context["line"] == 1 and violations[0].context["evidence"] == "print("
    violations, _ = evaluate([policy], ValidationContext(content="#!/bin/sh\nprint(1)"))
    assert violations == []


def test_merge_strategies_and_mandatory_policies() -> None:
    a, b, c = (rule("code", "must_not_use", v, id=v) for v in ("a", "b", "c"))
    company = [
        Policy(id="m", name="mandatory", layer="company", mode="mandatory", rules=[a, b]),
        Policy(id="o", name="optional", layer="company", rules=[a, b]),
        Policy(id="i", name="optional", layer="company", rules=[a, b]),
        Policy(id="x", name="optional", layer="company", rules=[a]),
    ]
    team = [
        Policy(id="m", name="tries to merge", layer="team", merge_strategy="merge", rules=[c]),
        Policy(id="o", name="adds", layer="team", merge_strategy="merge", rules=[c]),
        Policy(id="i", name="narrows", layer="team", merge_strategy="intersect", rules=[b, c]),
        Policy(id="x", name="replaces", layer="team", merge_strategy="override", rules=[c]),
    ]
    project = [Policy(id="m", name="overrides", layer="project", merge_strategy="override")]
    merged, notes = merge([("company", company), ("team/t", team)])
    rules = {p.id: [r.id for r in p.rules] for p in merged}
    assert rules == {"m": ["a", "b"], "o": ["a", "b", "c"], "i": ["b"], "x": ["c"]}
    assert [(n.policy_id, n.layer) for n in notes] == [("m", "team/t")]
    merged, _ = merge([("company", company), ("team/t", team), ("project/p", project)])
    assert {p.id: [r.id for r in p.rules] for p in merged}["m"] == []
    # The built-in policy is never changed lower down.
    merged, notes = merge(
        [
            ("builtin", [secrets_policy()]),
            (
                "company",
                [
                    Policy(
                        id="builtin-secrets", name="x", layer="company", merge_strategy="override"
                    )
                ],
            ),
        ]
    )
    assert merged[0].builtin and notes[0].reason == "built-in policy"


def policy(
    ms: Lamina, layer: str, layer_id: str | None, rules: list[dict[str, Any]], **kw: Any
) -> str:
    kw.setdefault("status", "accepted")
    return ms.knowledge.create(
        "policy", kw.pop("title", "A policy"), layer=layer, layer_id=layer_id, rules=rules, **kw
    ).item.id


def test_validate_merges_company_down_to_the_project(ms: Lamina) -> None:
    ms.memory.register_hierarchy(project_id="api", team_id="platform", org_id="eng")
    policy(
        ms,
        "company",
        None,
        [
            {
                "id": "no-requests",
                "target": "dependency",
                "operator": "must_not_use",
                "value": "requests",
                "severity": "block",
                "message": "use httpx",
            },
        ],
        id="deps",
        mode="mandatory",
    )
    policy(
        ms,
        "org",
        "eng",
        [
            {
                "id": "no-todo",
                "target": "code",
                "operator": "must_not_match",
                "value": "TODO",
                "severity": "warn",
            },
        ],
        id="style",
    )
    policy(
        ms,
        "team",
        "platform",
        [
            {
                "id": "no-print",
                "target": "code",
                "operator": "must_not_match",
                "value": r"print\(",
                "severity": "info",
            },
        ],
        id="style-platform",
        policy_id="style",
        merge_strategy="merge",
    )
    # A team policy trying to relax the mandatory company one by merge: ignored, noted.
    policy(ms, "team", "platform", [], id="deps-platform", policy_id="deps", merge_strategy="merge")
    policy(
        ms,
        "team",
        "other",
        [
            {
                "id": "never",
                "target": "code",
                "operator": "must_not_match",
                "value": ".",
                "severity": "block",
            },
        ],
        id="other-team",
    )
    # Not accepted: not in force.
    policy(
        ms,
        "company",
        None,
        [
            {
                "id": "draft-rule",
                "target": "code",
                "operator": "must_not_match",
                "value": ".",
                "severity": "block",
            },
        ],
        id="draft-policy",
        status="draft",
    )

    ctx = {"path": "app.py", "content": "print(x)  # TODO\n", "dependencies": ["requests==2"]}
    result = ms.governance.validate("project", ctx, "api")
    found = sorted((v.policy_id, v.rule_id, v.severity) for v in result.violations)
    assert found == [
        ("deps", "no-requests", "block"),
        ("style", "no-print", "info"),
        ("style", "no-todo", "warn"),
    ]
    assert not result.is_valid
    assert [(n.policy_id, n.layer) for n in result.notes] == [("deps", "team/platform")]
    assert set(result.policies_applied) == {"builtin-secrets", "deps", "style"}

    ok = ms.governance.validate("project", {"content": "x = 1\n", "dependencies": ["httpx"]}, "api")
    assert ok.is_valid and ok.violations == []
    # At the company layer only the company's policies apply.
    company = ms.governance.validate("company", ctx)
    assert {v.policy_id for v in company.violations} == {"deps"}
    assert [p.id for p in ms.governance.policies("team", "other")] == [
        "builtin-secrets",
        "deps",
        "other-team",
    ]


def test_drift_scores(ms: Lamina) -> None:
    policy(
        ms,
        "company",
        None,
        [
            {
                "id": "b",
                "target": "code",
                "operator": "must_not_use",
                "value": "eval",
                "severity": "block",
            },
            {
                "id": "w",
                "target": "code",
                "operator": "must_not_use",
                "value": "exec",
                "severity": "warn",
            },
            {
                "id": "i",
                "target": "code",
                "operator": "must_not_use",
                "value": "print",
                "severity": "info",
            },
        ],
    )
    ms.aio.governance._settings.secret_scan = False
    clean = ms.governance.drift("company", [{"content": "x = 1"}])
    assert clean.score == 0.0 and clean.rules_evaluated == 3
    full = ms.governance.drift("company", [{"content": "eval exec print"}])
    assert full.score == 1.0 and full.counts == {"info": 1, "warn": 1, "block": 1}
    mixed = ms.governance.drift("company", [{"content": "exec(x)"}, {"content": "print(y)"}])
    assert mixed.score == pytest.approx((0.5 + 0.1) / (2 * 1.6), abs=1e-6)
    assert mixed.contexts == 2


def test_secrets_never_enter_shared_layers(ms: Lamina) -> None:
    secrets = [
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "aws key AKIAIOSFODNN7EXAMPLE",
        "token ghp_" + "a1B2" * 9,
        "key sk-proj-" + "Ab3" * 10,
        "sk-ant-api03-" + "x9" * 15,
        "slack xoxb-1234567890-abcdefghij",
        "google AIza" + "B" * 35,
        "stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "postgresql://app:s3cretpass@db.internal:5432/prod",
        "password = hunter2hunter2!",
        'api_key: "A1b2C3d4E5f6"',
    ]
    for text in secrets:
        with pytest.raises(LaminaError) as err:
            ms.memory.add(f"note: {text}", layer="project", project_id="api")
        assert err.value.code is ErrorCode.POLICY_VIOLATION, text
        violation = err.value.details["violations"][0]
        assert violation["policy_id"] == "builtin-secrets" and violation["severity"] == "block"
        # What was found is never echoed back in full.
        assert text not in str(err.value.to_dict())
    assert ms.memory.list(project_id="api").total_count == 0
    benign = [
        "The password reset flow sends an email.",
        "Rotate the API key every 90 days.",
        "Use sk-learn for the classifier.",
        "token bucket rate limiting",
    ]
    for text in benign:
        ms.memory.add(text, layer="project", project_id="api")
    # Personal layers are not shared: no scan there.
    ms.memory.add("my password = hunter2hunter2!", layer="user", user_id="u1")
    head = ms.aio.knowledge.git.head("default")
    with pytest.raises(LaminaError) as err:
        ms.knowledge.create("spec", "Deploy", layer="company", body="token: ghp_" + "a1B2" * 9)
    assert err.value.code is ErrorCode.POLICY_VIOLATION
    assert ms.aio.knowledge.git.head("default") == head  # nothing committed
    bulk = [
        {"content": "fine", "layer": "team", "team_id": "t"},
        {"content": "AKIAIOSFODNN7EXAMPLE", "layer": "team", "team_id": "t"},
    ]
    with pytest.raises(LaminaError) as err:
        ms.memory.bulk_add(bulk)
    assert err.value.code is ErrorCode.POLICY_VIOLATION
    assert ms.memory.list(team_id="t").total_count == 0
    entry = ms.memory.add("harmless", layer="team", team_id="t")
    with pytest.raises(LaminaError):
        ms.memory.update(entry.id, content="now AKIAIOSFODNN7EXAMPLE")
    assert ms.memory.get(entry.id).content == "harmless"


def test_warn_violations_store_and_come_back(ms: Lamina) -> None:
    policy(
        ms,
        "company",
        None,
        [
            {
                "id": "no-todo",
                "target": "code",
                "operator": "must_not_match",
                "value": "TODO",
                "severity": "warn",
                "message": "resolve TODOs before sharing",
            },
        ],
    )
    entry = ms.memory.add("TODO: ask about the schema", layer="company", company_id="acme")
    assert [v["rule_id"] for v in entry.violations] == ["no-todo"]
    assert ms.memory.get(entry.id).content == "TODO: ask about the schema"
    change = ms.knowledge.create("spec", "Schema", layer="team", layer_id="t", body="TODO later")
    assert [v.rule_id for v in change.violations] == ["no-todo"]
    assert ms.knowledge.get(change.item.id).body == "TODO later\n"
    assert ms.memory.add("all done", layer="company", company_id="acme").violations == []


def test_write_checks_can_be_switched_off(data_dir: Any) -> None:
    settings = fast_settings(data_dir, governance={"secret_scan": False, "check_writes": False})
    with Lamina(settings) as ms:
        ms.memory.add("AKIAIOSFODNN7EXAMPLE", layer="project", project_id="p")
        assert ms.governance.policies() == []


def test_governance_bad_input(ms: Lamina) -> None:
    cases: list[tuple[Any, ErrorCode]] = [
        (lambda: ms.governance.validate("company", "not a dict"), ErrorCode.INVALID_ARGUMENT),
        (
            lambda: ms.governance.validate("company", {"dependencies": "x"}),
            ErrorCode.INVALID_ARGUMENT,
        ),
        (lambda: ms.governance.validate("company", {"unknown": 1}), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.governance.validate("moon", {"content": ""}), ErrorCode.INVALID_LAYER),
        (lambda: ms.governance.validate("team", {"content": ""}), ErrorCode.MISSING_IDENTIFIER),
        (lambda: ms.governance.drift("company", {"content": "x"}), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.governance.drift("company", []), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.governance.policies("team", "../x"), ErrorCode.INVALID_ARGUMENT),
        (
            lambda: ms.governance.validate("company", {"content": "x" * 2_000_000}),
            ErrorCode.CONTENT_TOO_LONG,
        ),
    ]
    for call, code in cases:
        with pytest.raises(LaminaError) as err:
            call()
        assert err.value.code is code
