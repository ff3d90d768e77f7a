from __future__ import annotations

import pytest

from lamina import ErrorCode, Lamina, LaminaError, MemoryLayer
from lamina.memory.layers import Identifiers, accessible_layers, parse_layer, scope_for


def test_precedence_agent_first_company_last() -> None:
    assert [layer.precedence for layer in MemoryLayer] == [1, 2, 3, 4, 5, 6, 7]
    assert MemoryLayer.AGENT.precedence == 1 and MemoryLayer.COMPANY.precedence == 7


def test_required_identifiers() -> None:
    assert MemoryLayer.AGENT.required_identifiers == ("agent_id", "user_id")
    assert MemoryLayer.SESSION.required_identifiers == ("session_id", "user_id")
    assert MemoryLayer.TEAM.required_identifiers == ("team_id",)
    with pytest.raises(LaminaError) as err:
        scope_for(MemoryLayer.SESSION, Identifiers(user_id="u"))
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER
    assert err.value.details["identifier"] == "session_id"
    assert "session_id" in err.value.message


def test_invalid_layer_is_not_retryable() -> None:
    with pytest.raises(LaminaError) as err:
        parse_layer("galaxy")
    assert err.value.code is ErrorCode.INVALID_LAYER and err.value.retryable is False
    assert parse_layer(" Project ") is MemoryLayer.PROJECT


def test_accessible_layers_from_identifiers() -> None:
    ids = Identifiers(user_id="u", project_id="p", team_id="t", org_id="o", company_id="c")
    assert [layer.value for layer in accessible_layers(ids)] == [
        "user",
        "project",
        "team",
        "org",
        "company",
    ]
    full = Identifiers("a", "u", "s", "p", "t", "o", "c")
    assert accessible_layers(full) == list(MemoryLayer)


def test_control_characters_in_identifiers_rejected() -> None:
    with pytest.raises(LaminaError) as err:
        Identifiers(user_id="bad\x1fid")
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


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
