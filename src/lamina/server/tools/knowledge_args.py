"""The arguments of the knowledge skill's tools (knowledge.py); strict, as every tool's
(args.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lamina.server.tools.args import Args


class _KnowledgeFilters(Args):
    type: str | None = None
    layer: str | None = None
    layer_id: str | None = None
    status: str | None = Field(default="accepted", description="A status, or 'any'.")
    tags: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)


class KnowledgeQuery(_KnowledgeFilters):
    query: str
    mode: Literal["semantic", "keyword", "hybrid"] | None = None


class KnowledgeGet(Args):
    id: str
    history: bool = False


class KnowledgeContent(Args):
    summary: str | None = None
    body: str | None = None
    severity: str | None = None
    tags: list[str] | None = None
    constraints: list[str] | None = None
    related: list[str] | None = None
    policy_id: str | None = None
    mode: str | None = None
    merge_strategy: str | None = None
    rules: list[dict[str, Any]] | None = None
    author: str = "a2a"
    message: str | None = None


class KnowledgeCreate(KnowledgeContent):
    type: str = Field(description="adr, policy, pattern or spec.")
    title: str
    layer: str = Field(description="company, org, team or project.")
    layer_id: str | None = None
    id: str | None = None
    status: str = "draft"


class KnowledgeUpdate(KnowledgeContent):
    id: str
    title: str | None = None


class KnowledgeStatusArgs(Args):
    id: str
    status: str
    superseded_by: str | None = None
    author: str = "a2a"
    message: str | None = None


class KnowledgeHistory(Args):
    id: str
    limit: int = Field(default=50, ge=1)
