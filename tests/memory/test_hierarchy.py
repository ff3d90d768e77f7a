"""The hierarchy (memory/hierarchy.py): registered links, defaults, resolution and the
layers it reaches."""

from __future__ import annotations

import pytest

from lamina import ErrorCode, Lamina, LaminaError, MemoryLayer

ALL_IDS = dict(
    agent_id="bot",
    user_id="alice",
    session_id="s1",
    project_id="atlas",
    team_id="platform",
    org_id="eng",
    company_id="acme",
)


def test_hierarchy_resolution(ms: Lamina) -> None:
    unregistered = ms.memory.resolve_identifiers(user_id="u", project_id="p1")
    assert unregistered["identifiers"] == {
        "user_id": "u",
        "project_id": "p1",
        "team_id": "default",
        "org_id": "default",
        "company_id": "default",
    }
    assert unregistered["layers"] == ["user", "project", "team", "org", "company"]
    links = ms.memory.register_hierarchy(
        project_id="p1", team_id="platform", org_id="eng", company_id="acme"
    )
    assert [(x.level, x.child_id, x.parent_id) for x in links] == [
        ("project", "p1", "platform"),
        ("team", "platform", "eng"),
        ("org", "eng", "acme"),
    ]
    resolved = ms.memory.resolve_identifiers(project_id="p1")
    assert resolved["identifiers"]["company_id"] == "acme"
    ms.memory.set_hierarchy_defaults(team_id="shared-team")
    other = ms.memory.resolve_identifiers(project_id="p2")["identifiers"]
    assert other["team_id"] == "shared-team" and other["org_id"] == "default"
    explicit = ms.memory.resolve_identifiers(project_id="p1", team_id="given")["identifiers"]
    assert explicit["team_id"] == "given"
    assert (
        ms.memory.resolve_identifiers(project_id="p1", tenant_id="t2")["identifiers"]["team_id"]
        == "default"
    )
    with pytest.raises(LaminaError) as err:
        ms.memory.register_hierarchy(project_id="p1")
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_memories_reach_registered_parents(ms: Lamina) -> None:
    ms.memory.register_hierarchy(
        project_id="atlas", team_id="platform", org_id="eng", company_id="acme"
    )
    team = ms.memory.add("Platform team deploys on Fridays", layer="team", project_id="atlas")
    assert team.identifiers == {"team_id": "platform"}
    hits = ms.memory.search("when do we deploy", user_id="u", project_id="atlas", threshold=0.2)
    assert [h.memory.id for h in hits] == [team.id]
    assert (
        ms.memory.search("when do we deploy", user_id="u", project_id="other", threshold=0.2) == []
    )


def test_user_and_project_reach_five_layers_not_agent_or_session(ms: Lamina) -> None:
    topics = [
        "wiki pages",
        "runbooks",
        "release notes",
        "on-call rota",
        "CI pipeline",
        "staging servers",
        "rollback plan",
    ]
    for layer, topic in zip(MemoryLayer, topics, strict=True):
        ms.memory.add(f"The deploy checklist mentions the {topic}", layer=layer, **ALL_IDS)
    ms.memory.register_hierarchy(
        project_id="atlas", team_id="platform", org_id="eng", company_id="acme"
    )
    hits = ms.memory.search("deploy checklist", user_id="alice", project_id="atlas", threshold=0.0)
    assert [h.memory.layer.value for h in hits] == ["user", "project", "team", "org", "company"]
    everything = ms.memory.search("deploy checklist", threshold=0.0, **ALL_IDS)
    assert [h.memory.layer for h in everything] == list(MemoryLayer)
