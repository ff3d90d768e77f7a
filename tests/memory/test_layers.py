from __future__ import annotations

import pytest

from lamina import ErrorCode, LaminaError, MemoryLayer
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
    full = Identifiers.of("a", "u", "s", "p", "t", "o", "c")
    assert accessible_layers(full) == list(MemoryLayer)


def test_control_characters_in_identifiers_rejected() -> None:
    with pytest.raises(LaminaError) as err:
        Identifiers(user_id="bad\x1fid")
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
