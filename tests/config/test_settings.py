"""Settings: their sources and precedence, defaults, and the errors bad ones get."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from lamina import ErrorCode, Lamina, LaminaError, load_settings
from lamina.config import Settings


def test_settings_sources_and_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "lamina.toml"
    config.write_text(
        'tenant_id = "from-file"\n[memory]\nmax_content_length = 111\nsearch_limit = 3\n'
        "[retry]\nmax_retries = 5\n"
    )
    settings = load_settings(config)
    assert settings.tenant_id == "from-file" and settings.memory.max_content_length == 111
    assert settings.retry.policy().max_retries == 5
    monkeypatch.setenv("LAMINA_MEMORY__MAX_CONTENT_LENGTH", "222")
    monkeypatch.setenv("LAMINA_TENANT_ID", "from-env")
    settings = load_settings(config)
    assert settings.memory.max_content_length == 222 and settings.tenant_id == "from-env"
    assert settings.memory.search_limit == 3
    settings = load_settings(config, tenant_id="from-kwargs")
    assert settings.tenant_id == "from-kwargs"
    monkeypatch.setenv("LAMINA_CONFIG", str(config))
    assert load_settings().memory.search_limit == 3


def test_defaults() -> None:
    settings = load_settings()
    assert settings.tenant_id == "default" and settings.embedding.provider == "local"
    assert settings.memory.search_threshold == 0.7 and settings.memory.search_limit == 10
    assert settings.memory.dedup_threshold == 0.95
    policy = settings.retry.policy()
    assert (policy.max_retries, policy.initial_delay, policy.multiplier, policy.max_delay) == (
        3,
        1.0,
        2.0,
        30.0,
    )
    assert settings.sqlite_path() == settings.data_dir / "lamina.db"


@pytest.mark.parametrize(
    ("content", "overrides"),
    [
        (None, {"memory": {"search_threshold": 7}}),
        (None, {"embedding": {"provider": "magic"}}),
        (None, {"unknown_setting": 1}),
        ("this is = not toml [", {}),
        ("[memory]\nmax_content_length = -5\n", {}),
    ],
)
def test_invalid_settings_are_configuration_errors(
    tmp_path: Path, content: str | None, overrides: dict[str, object]
) -> None:
    config = None
    if content is not None:
        config = tmp_path / "bad.toml"
        config.write_text(content)
    with pytest.raises(LaminaError) as err:
        load_settings(config, **overrides)
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR


def test_missing_config_file_and_bad_database_url(tmp_path: Path) -> None:
    with pytest.raises(LaminaError) as err:
        load_settings(tmp_path / "absent.toml")
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR and "absent.toml" in err.value.message
    for url in ("sqlite:///", "mysql://x", "file.db"):
        with pytest.raises(LaminaError) as err:
            load_settings(database_url=url).store_kind()
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    assert load_settings(database_url="postgresql://localhost/db").store_kind() == "postgresql"
    assert load_settings(database_url="sqlite:///x.db").store_kind() == "sqlite"
    db = tmp_path / "custom.db"
    with Lamina(database_url=f"sqlite:///{db}", data_dir=tmp_path / "unused") as ms:
        ms.memory.add("x", layer="user", user_id="u")
    assert db.is_file()


@pytest.mark.parametrize(
    ("content", "overrides", "key", "section"),
    [
        ("[embedding]\nunknwon = 1\n", {}, "unknwon", "embedding"),
        (None, {"embedding": {"modle": "x"}}, "modle", "embedding"),
        ("[observational_memory]\nenable = true\n", {}, "enable", "observational_memory"),
        (
            "[server.tiers.gold]\nrequests_per_minut = 5\n",
            {},
            "requests_per_minut",
            "server.tiers.gold",
        ),
        (
            '[[server.api_keys]]\nkey_hash = "sha256:'
            + "0" * 64
            + '"\ntenant_id = "t"\ntenat = "x"\n',
            {},
            "tenat",
            "server.api_keys.0",
        ),
        (None, {"server": {"tiers": {"default": {"skils": {}}}}}, "skils", "server.tiers.default"),
    ],
)
def test_unknown_keys_in_sections_are_rejected(
    tmp_path: Path, content: str | None, overrides: dict[str, object], key: str, section: str
) -> None:
    config = None
    if content is not None:
        config = tmp_path / "lamina.toml"
        config.write_text(content)
    with pytest.raises(LaminaError) as err:
        load_settings(config, **overrides)
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    assert f"unknown key {key!r} in section [{section}]" in err.value.message


def test_every_section_rejects_unknown_keys() -> None:
    sections = [
        name
        for name, field in Settings.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    ]
    assert {"embedding", "memory", "llm", "server", "knowledge", "retry"} <= set(sections)
    for name in sections:
        with pytest.raises(LaminaError) as err:
            load_settings(**{name: {"no_such_key": 1}})
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR
        assert f"unknown key 'no_such_key' in section [{name}]" in err.value.message
    with pytest.raises(LaminaError) as err:
        load_settings(no_such_key=1)
    assert "unknown key 'no_such_key'" in err.value.message and "section" not in err.value.message


def test_environment_names_that_are_no_setting_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other programs set LAMINA_* variables: a name that is no setting is ignored, at the top
    and in a section alike; the value of a real setting is validated."""
    monkeypatch.setenv("LAMINA_NO_SUCH_SETTING", "1")
    monkeypatch.setenv("LAMINA_EMBEDDING__MODLE", "typo")
    monkeypatch.setenv("LAMINA_SERVER__TIERS__GOLD__REQUESTS_PER_MINUT", "5")
    monkeypatch.setenv("LAMINA_EMBEDDING__MODEL", "from-env")
    monkeypatch.setenv("LAMINA_SERVER__TIERS__GOLD__REQUESTS_PER_MINUTE", "7")
    settings = load_settings()
    assert settings.embedding.model == "from-env"
    assert settings.server.tiers["gold"].requests_per_minute == 7
    monkeypatch.setenv("LAMINA_RETRY", '{"max_retrys": 1}')
    with pytest.raises(LaminaError) as err:
        load_settings()
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    assert "unknown key 'max_retrys' in section [retry]" in err.value.message
