"""Settings: keyword arguments > environment (LAMINA_*) > TOML file > embedded defaults.

Nested groups use ``__`` in the environment: ``LAMINA_EMBEDDING__PROVIDER=openai``,
``LAMINA_MEMORY__MAX_CONTENT_LENGTH=100000``. The TOML file (``config_file=`` or
``LAMINA_CONFIG``) uses the same names, groups as tables: ``[embedding]``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import platformdirs
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

# Re-exported: ``from lamina.config import ServerSettings, Section, ...`` as before the split.
from lamina.config.section import Section as Section
from lamina.config.server import ApiKey as ApiKey
from lamina.config.server import IdentifierFields as IdentifierFields
from lamina.config.server import McpSettings as McpSettings
from lamina.config.server import ServerSettings as ServerSettings
from lamina.config.server import TierLimits as TierLimits
from lamina.errors import ErrorCode, LaminaError
from lamina.retry import RetryPolicy


class _EnvSource(EnvSettingsSource):
    """LAMINA_* variables. One whose name is no setting is ignored, at the top (other programs
    set LAMINA_* variables too) and inside a section (``LAMINA_EMBEDDING__MODLE``) alike;
    the value of a setting is validated as given."""

    def explode_env_vars(
        self, field_name: str, field: FieldInfo, env_vars: Mapping[str, str | None]
    ) -> dict[str, Any]:
        exploded = super().explode_env_vars(field_name, field, env_vars)
        known: dict[str, Any] = _known_keys(exploded, field.annotation)
        return known


def _known_keys(value: Any, annotation: Any) -> Any:
    """``value`` without the keys that the models in ``annotation`` do not have."""
    if not isinstance(value, dict):
        return value
    origin = get_origin(annotation)
    if origin is dict:
        item = get_args(annotation)[1]
        return {k: _known_keys(v, item) for k, v in value.items()}
    for kind in get_args(annotation) if origin in (Union, UnionType) else (annotation,):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            fields = kind.model_fields
            return {
                k: _known_keys(v, fields[k].annotation) for k, v in value.items() if k in fields
            }
    return value


class EmbeddingSettings(Section):
    """Which embedder turns text into vectors."""

    provider: Literal["local", "openai"] = "local"
    #: Model name; for ``local`` the only model is all-MiniLM-L6-v2.
    model: str | None = None
    #: OpenAI-compatible API root, e.g. ``https://api.openai.com/v1``.
    base_url: str | None = None
    dimensions: int | None = Field(default=None, gt=0)
    #: Name of the environment variable holding the API key (the key never sits in a file).
    api_key_env: str = "OPENAI_API_KEY"
    batch_size: int = Field(default=64, gt=0, le=2048)
    timeout_seconds: float = Field(default=30.0, gt=0)
    #: Threads the local model may use (0: one per core).
    threads: int = Field(default=0, ge=0)
    #: The local model's optimised graph is kept in the user cache directory (~90 MB) so
    #: that later processes load it in ~0.05 s instead of optimising it again (~0.3 s).
    model_cache: bool = True


class MemorySettings(Section):
    """Limits and defaults of the memory service."""

    max_content_length: int = Field(default=65_536, gt=0)
    max_query_length: int = Field(default=4_096, gt=0)
    #: Default minimum score of a search hit, in every mode (scores lie in [0, 1]; see
    #: docs/search.md for what 0.7 means and how it was calibrated).
    search_threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    search_limit: int = Field(default=10, gt=0)
    max_limit: int = Field(default=1_000, gt=0)
    list_limit: int = Field(default=50, gt=0)
    dedup_threshold: float = Field(default=0.95, gt=0.0, le=1.0)
    #: Weight of the semantic part in hybrid scores; the rest is the keyword part.
    hybrid_semantic_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    #: add and bulk_add return an exact duplicate (same normalised content, same scope, still
    #: valid) instead of storing a new row; a call's ``dedup=`` overrides (docs/memory.md).
    dedup: bool = True
    #: Seconds a session-layer memory lives when its call gives no ``ttl`` (None: forever).
    session_ttl: float | None = Field(default=None, gt=0)
    #: Seconds between runs of the expiry job that removes expired memories (0: no job;
    #: expired memories are never returned either way).
    expiry_interval: float = Field(default=60.0, ge=0)
    #: Consolidation (``infer=True``): tokens of messages per extraction prompt, facts per
    #: decision prompt, and stored memories shown to the model beside each fact.
    infer_max_input_tokens: int = Field(default=2_000, ge=100)
    infer_facts_per_call: int = Field(default=20, gt=0, le=100)
    infer_candidates: int = Field(default=5, gt=0, le=20)


class ContextSettings(Section):
    """``ms.context``: retrieval of the context layers and prompt assembly."""

    #: Items per layer when a call does not say.
    max_per_layer: int = Field(default=5, gt=0, le=100)
    #: How the searchable layers are searched: hybrid, semantic or keyword.
    search_mode: Literal["hybrid", "semantic", "keyword"] = "hybrid"
    #: Weight of semantic similarity in hybrid scores of context items.
    semantic_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    #: Items scoring below this are not retrieved (hybrid and semantic scores lie in [0, 1]).
    min_score: float = Field(default=0.2, ge=0.0, le=1.0)
    #: Most memories in the prompt's "Relevant Memories" section (0: none).
    rag_limit: int = Field(default=6, ge=0, le=100)
    #: Tokens that section may spend, heading included (None: no bound): the best memories
    #: that fit, a longer one passed over for a shorter next one; the best one always shows.
    rag_token_budget: int | None = Field(default=220, ge=1)
    #: Minimum search score of a memory for that section (None: the memory search default).
    rag_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    #: Longest query accepted (characters).
    max_query_length: int = Field(default=4_096, gt=0)


#: The random part of each wait between a chat model's retries (up to half of it).
LLM_RETRY_JITTER = 0.5


class LLMSettings(Section):
    """The chat model: an OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp, LM
    Studio via ``base_url``) or Anthropic."""

    provider: Literal["openai", "anthropic"] = "openai"
    model: str | None = None
    base_url: str | None = None
    #: Name of the environment variable holding the API key (the key never sits in a file).
    api_key_env: str | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    #: How long an attempt may take to connect (within timeout_seconds): a host that never
    #: completes the connection fails as fast as one that refuses it.
    connect_timeout_seconds: float = Field(default=1.0, gt=0)
    #: Retries of a call's transient failures (connection errors, timeouts, 408/409/429,
    #: 5xx): lamina's one retry layer (the SDK client's own retries are off), waiting
    #: retry_initial_delay, then twice as long each time up to retry_max_delay, jittered
    #: (each wait shortened by up to half at random). The defaults give up on an
    #: unreachable server (refused, or never connecting) within about 4.5 s.
    max_retries: int = Field(default=2, ge=0, le=10)
    retry_initial_delay: float = Field(default=0.5, ge=0.0)
    retry_max_delay: float = Field(default=8.0, ge=0.0)
    max_tokens: int = Field(default=1024, gt=0)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)

    def retry_policy(self) -> RetryPolicy:
        """The chat model's retries (``max_retries``, jittered backoff)."""
        return RetryPolicy(
            self.max_retries,
            self.retry_initial_delay,
            2.0,
            self.retry_max_delay,
            jitter=LLM_RETRY_JITTER,
        )


class ObservationalMemorySettings(Section):
    """Observational memory: an Observer compresses session messages into observations, a
    Reflector condenses observations into reflections. Off by default (then nothing changes)."""

    enabled: bool = False
    #: The Observer's and Reflector's chat model; unset: the primary ``llm`` settings.
    provider: Literal["openai", "anthropic"] | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    #: Un-observed message tokens in a session that trigger an observation.
    message_token_threshold: int = Field(default=1000, gt=0)
    #: Most message tokens the observer is sent in one call: a longer backlog is observed in
    #: several batches, one observation each.
    observer_batch_tokens: int = Field(default=8000, ge=100)
    #: Observation tokens in a session that trigger a reflection.
    observation_token_threshold: int = Field(default=2000, gt=0)
    #: Most tokens of recent (un-observed) messages handed to the model.
    max_message_token_budget: int = Field(default=8000, gt=0)
    #: Reflections and observations injected into a prompt (0: unlimited).
    max_reflections_in_context: int = Field(default=5, ge=0)
    max_observations_in_context: int = Field(default=20, ge=0)
    #: Tokens the Conversation Memory section may use.
    memory_token_budget: int = Field(default=4000, gt=0)
    #: Reflections in a session that trigger a meta-reflection.
    reflection_consolidation_threshold: int = Field(default=5, ge=2)
    #: Replace observed messages by the observation (a compacted summary).
    compact: bool = False
    #: Extract entities and relations from every observation (one more LLM call each) and
    #: add a Knowledge Graph section to prompts.
    graph: bool = False
    #: Hops from the entities a query names, and relations shown, in that section.
    graph_depth: int = Field(default=2, ge=1, le=5)
    graph_limit: int = Field(default=20, ge=1, le=200)
    #: Sessions waiting for the background observer; a full queue drops triggers.
    queue_size: int = Field(default=256, gt=0)
    #: Background workers (sessions observed at once, never two on one session).
    workers: int = Field(default=2, gt=0, le=64)
    #: Seconds a worker holds a session's lease (longer than one LLM call with retries).
    lease_seconds: float = Field(default=300.0, gt=0)


class PostgresSettings(Section):
    """Connection pool and limits of the PostgreSQL store."""

    pool_min: int = Field(default=1, ge=0)
    pool_max: int = Field(default=10, gt=0)
    statement_timeout_ms: int = Field(default=30_000, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    #: HNSW candidate list size per search: recall against latency (pgvector's default is 40).
    hnsw_ef_search: int = Field(default=200, ge=1, le=1000)


class RetrySettings(Section):
    """Retries of transient store and embedder failures."""

    max_retries: int = Field(default=3, ge=0)
    initial_delay: float = Field(default=1.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1.0)
    max_delay: float = Field(default=30.0, ge=0)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_retries, self.initial_delay, self.multiplier, self.max_delay)


class KnowledgeSettings(Section):
    """The git-backed knowledge repository."""

    #: Where the per-tenant git repositories live (default: ``<data_dir>/knowledge``).
    path: Path | None = None
    #: Seconds a write waits for another writer's lock before CONFLICT.
    lock_timeout: float = Field(default=30.0, gt=0)


class GovernanceSettings(Section):
    """Checks of content entering shared layers (project, team, org, company)."""

    #: The built-in rule set that blocks secrets (API keys, private keys, passwords, tokens).
    secret_scan: bool = True
    #: Evaluate the layer's merged policies on memory and knowledge writes.
    check_writes: bool = True


def default_data_dir() -> Path:
    """The platform's user data directory (``~/.local/share/lamina`` on Linux)."""
    return Path(platformdirs.user_data_dir("lamina", appauthor=False))


def default_config_file() -> Path:
    """The config file read when neither ``config_file=`` nor LAMINA_CONFIG names one
    (``~/.config/lamina/lamina.toml`` on Linux); used only if it exists."""
    return Path(platformdirs.user_config_dir("lamina", appauthor=False)) / "lamina.toml"


SQLITE_PREFIX = "sqlite:///"


def sqlite_url_path(url: str) -> Path:
    """The file a ``sqlite:`` URL names, as an absolute path.

    ``sqlite:///relative/file.db`` is relative to the current directory,
    ``sqlite:////absolute/file.db`` (four slashes) is absolute, ``~`` is expanded. The
    directory must exist: a typo must not silently create a second, empty store."""
    if not url.startswith(SQLITE_PREFIX) or len(url) == len(SQLITE_PREFIX):
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"database URL {url!r} is not supported: use sqlite:///relative/file.db, "
            "sqlite:////absolute/file.db or postgresql://user@host:port/database",
            details={"database_url": url},
        )
    raw = url[len(SQLITE_PREFIX) :]
    if raw == ":memory:" or raw.startswith(("file:", ":memory:")) or "?" in raw:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"database URL {url!r}: only a plain file path is supported (no in-memory "
            "databases, no URI parameters)",
            details={"database_url": url},
        )
    path = Path(raw).expanduser().absolute()
    if not path.parent.is_dir():
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"database URL {url!r}: directory {path.parent} does not exist",
            details={"database_url": url, "directory": str(path.parent)},
        )
    if path.is_dir():
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"database URL {url!r}: {path} is a directory, not a database file",
            details={"database_url": url},
        )
    return path


class Settings(BaseSettings):
    """Everything a runtime is built from."""

    model_config = SettingsConfigDict(
        env_prefix="LAMINA_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    #: ``sqlite:///path/to/file.db`` or ``postgresql://user@host:port/db``; empty means
    #: ``sqlite:///<data_dir>/lamina.db``.
    database_url: str | None = None
    tenant_id: str = "default"
    #: Seconds a write waits for another writer's lock before PROVIDER_ERROR (then retried).
    sqlite_busy_timeout: float = Field(default=30.0, gt=0)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    observational_memory: ObservationalMemorySettings = Field(
        default_factory=ObservationalMemorySettings
    )
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    governance: GovernanceSettings = Field(default_factory=GovernanceSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, value: Path) -> Path:
        # Relative to the directory the process started in, fixed once: every entry point
        # prints and uses the same absolute path.
        return value.expanduser().absolute()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _EnvSource(settings_cls), TomlConfigSettingsSource(settings_cls))

    def store_kind(self) -> Literal["sqlite", "postgresql"]:
        url = self.database_url or ""
        if url.startswith(("postgresql://", "postgres://")):
            return "postgresql"
        self.sqlite_path()
        return "sqlite"

    def knowledge_path(self) -> Path:
        """Where the knowledge repositories live."""
        return self.knowledge.path or self.data_dir / "knowledge"

    def sqlite_path(self) -> Path:
        """The SQLite file this configuration points at."""
        url = self.database_url
        if not url:
            return self.data_dir / "lamina.db"
        return sqlite_url_path(url)

    def database_location(self) -> str:
        """Where the data is, for people and logs (a PostgreSQL password is masked)."""
        if self.store_kind() == "postgresql":
            return redact_url(self.database_url or "")
        return str(self.sqlite_path())

    @property
    def sources(self) -> dict[str, str]:
        """Where ``data_dir`` and the config file came from (``lamina info``)."""
        return dict(self._sources)


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, in the user part and in a
    ``password=`` query parameter alike."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if sep and at and ":" in userinfo:
        url = f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"
    return re.sub(r"([?&]password=)[^&]*", r"\1***", url)


def _config_source(config_file: str | Path | None) -> tuple[Path | None, str]:
    if config_file is not None:
        return Path(config_file), "argument"
    env = os.environ.get("LAMINA_CONFIG")
    if env:
        return Path(env), "LAMINA_CONFIG"
    default = default_config_file()
    if default.is_file():
        return default, "default location"
    return None, "none"


def _problem(err: ErrorDetails) -> str:
    *section, key = [str(p) for p in err["loc"]] or ["?"]
    if err["type"] == "extra_forbidden":
        where = f" in section [{'.'.join(section)}]" if section else ""
        return f"unknown key {key!r}{where}"
    return f"{'.'.join([*section, key])}: {err['msg']}"


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from keyword overrides, the environment and a TOML file: the one named
    by ``config_file``, else by LAMINA_CONFIG, else ``default_config_file()`` if it exists.

    One rule for the data directory at every entry point (library, CLI, servers,
    ``scripts/run``): argument or flag > LAMINA_DATA_DIR > config file > platform default."""
    path, config_origin = _config_source(config_file)
    toml_path: Path | None = None
    toml_data: dict[str, Any] = {}
    if path:
        toml_path = Path(path)
        if not toml_path.is_file():
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"config file {toml_path} does not exist",
                details={"config_file": str(toml_path)},
            )
        try:
            toml_data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"config file {toml_path} is not valid TOML: {exc}",
                details={"config_file": str(toml_path)},
            ) from exc

    class _FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=toml_path)

    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = _FileSettings(**given)
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"invalid settings: {problems}",
            details={"errors": [str(e["loc"]) for e in exc.errors()]},
        ) from exc
    if "data_dir" in given:
        data_origin = "argument"
    elif os.environ.get("LAMINA_DATA_DIR"):
        data_origin = "LAMINA_DATA_DIR"
    elif "data_dir" in toml_data and toml_path is not None:
        data_origin = f"config file {toml_path}"
        # A relative data_dir in a config file is relative to that file, not to wherever the
        # process happens to start.
        raw = Path(str(toml_data["data_dir"])).expanduser()
        if not raw.is_absolute():
            settings.data_dir = (toml_path.absolute().parent / raw).absolute()
    else:
        data_origin = "platform default"
    settings._sources = {
        "data_dir": data_origin,
        "config_file": str(toml_path) if toml_path else "",
        "config_file_source": config_origin,
    }
    return settings
