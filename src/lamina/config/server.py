"""The doors' settings: the server (its address, API keys, rate-limit tiers, threads and the
inspector) and ``lamina mcp``'s default identifiers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lamina.config.section import Section


class ApiKey(Section):
    """One API key of the server: only its SHA-256 hash is configured (``lamina keys new``
    prints a key and this entry)."""

    key_hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    tenant_id: str = Field(min_length=1, max_length=128)
    tier: str = "default"
    #: A label for logs and for people (never the key).
    name: str = ""


class TierLimits(Section):
    """Requests per minute of one tenant in a tier: all skills together, and per skill
    (memory, knowledge, governance, search, tasks) where set."""

    requests_per_minute: int = Field(default=100, gt=0)
    skills: dict[str, int] = Field(default_factory=dict)


class ServerSettings(Section):
    """``lamina serve``: the A2A server (and ``lamina mcp --transport http``)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8750, ge=0, le=65535)
    #: Server processes sharing the address (the store, threads and tasks are shared; each
    #: process has its own query cache, /metrics and, without ``redis_url``, rate limits).
    workers: int = Field(default=1, ge=1, le=64)
    #: The URL clients reach the server at (the card's interfaces); default http://host:port.
    public_url: str | None = None
    api_keys: list[ApiKey] = Field(default_factory=list)
    tiers: dict[str, TierLimits] = Field(default_factory=lambda: {"default": TierLimits()})
    #: ``redis://host:port/db``: rate limits shared by every replica; unset: in-process.
    redis_url: str | None = None
    #: Largest request body accepted (bytes); larger → 413.
    max_body_bytes: int = Field(default=1_048_576, gt=0)
    #: A thread idle this long (seconds) is expired; continuing it is an error.
    thread_ttl: float = Field(default=86_400.0, gt=0)
    #: The conversation context of a thread expires this long (seconds) after its last write.
    state_ttl: float = Field(default=3_600.0, gt=0)
    #: Largest conversation context per thread (bytes of JSON).
    max_state_bytes: int = Field(default=1_048_576, gt=0)
    #: Seconds between cleanup runs; expired threads are deleted this long after expiring.
    cleanup_interval: float = Field(default=300.0, gt=0)
    expired_retention: float = Field(default=7 * 86_400.0, ge=0)
    #: Retention bounded by size as well as time: past this many tasks (across tenants),
    #: each cleanup deletes the oldest finished ones (never one waiting on its client).
    max_tasks: int = Field(default=1_000_000, gt=0)
    #: Past this many threads (across tenants), each cleanup deletes the expired ones first,
    #: then the least recently used, with their tasks (never one with a task waiting on its
    #: client).
    max_threads: int = Field(default=1_000_000, gt=0)
    #: Past this many bytes of stored tasks (across tenants: each task's compressed JSON, a
    #: one-shot call's thread record stored with it), each cleanup deletes the oldest
    #: finished tasks until they fit (never one waiting on its client).
    max_task_bytes: int = Field(default=1024**3, gt=0)
    #: Tool calls remembered per thread (the oldest are dropped).
    max_turns: int = Field(default=20, gt=0, le=1000)
    #: Memories and constraints in a new thread's session context (0: none).
    session_memories: int = Field(default=5, ge=0, le=100)
    #: Route free text through the LLM (``llm`` settings, ``router_model`` if set).
    llm_router: bool = True
    router_model: str | None = None
    #: The web inspector at /ui: ``auto`` serves it when ``host`` is a loopback address,
    #: ``on`` everywhere (behind the API keys), ``off`` never (docs/ui.md).
    ui: Literal["auto", "on", "off"] = "auto"
    #: The key that signs the inspector's session cookies (HMAC-SHA256). Unset: a random one
    #: per process, so signing in again is needed after a restart; set the same secret on
    #: every replica behind one address.
    ui_secret: str | None = Field(default=None, min_length=32)
    #: How long an inspector sign-in lasts (seconds).
    ui_session_ttl: float = Field(default=8 * 3600.0, gt=0)


class IdentifierFields(Section):
    """The seven memory identifiers as optional fields, unknown keys refused: the ``mcp``
    settings and the arguments of the server's memory tools are built on it."""

    agent_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    team_id: str | None = None
    org_id: str | None = None
    company_id: str | None = None


class McpSettings(IdentifierFields):
    """``lamina mcp``: identifiers filled into every tool call that omits them, so a model
    does not have to invent them (the command's ``--user-id`` … options win over these)."""

    def identifiers(self) -> dict[str, str]:
        """The identifiers that are set."""
        return {k: v for k, v in self.model_dump().items() if v is not None}
