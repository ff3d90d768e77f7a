"""Optional features and the extras that install them.

The core (``pip install lamina``) is the embedded default: SQLite, the local embedder, the
library and the CLI. Everything else is an extra; :func:`require` is called where a
feature first imports an extra's packages and turns a missing package into a
CONFIGURATION_ERROR that names what to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from lamina.errors import ErrorCode, LaminaError

__all__ = ["EXTRAS", "Extra", "installed", "require"]


@dataclass(frozen=True)
class Extra:
    """An extra of the ``lamina`` distribution: the feature it adds and the top-level
    modules that feature imports (checked in this order)."""

    feature: str
    modules: tuple[str, ...]


EXTRAS: dict[str, Extra] = {
    "server": Extra("The A2A server", ("a2a", "starlette", "uvicorn")),
    "mcp": Extra("The MCP server", ("mcp",)),
    "postgres": Extra("PostgreSQL support", ("psycopg", "psycopg_pool", "pgvector")),
    "redis": Extra("Redis rate limits", ("redis",)),
    "openai": Extra("The OpenAI-compatible chat model", ("openai", "httpx")),
    "anthropic": Extra("The Anthropic chat model", ("anthropic",)),
    "langgraph": Extra("The LangGraph store", ("langgraph",)),
    "openai-agents": Extra("The OpenAI Agents SDK session and tools", ("agents",)),
    "langchain": Extra("The LangChain chat history and retriever", ("langchain_core",)),
    "pydantic-ai": Extra("The pydantic-ai toolset", ("pydantic_ai",)),
}


def require(extra: str, feature: str | None = None) -> None:
    """Import the modules of ``extra``; CONFIGURATION_ERROR naming the extra when one of
    them is not installed (``feature`` words the message when the extra's default does
    not fit). An ImportError from anything else propagates unchanged."""
    spec = EXTRAS[extra]
    for module in spec.modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != module:
                raise
            what = feature or spec.feature
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"{what} needs the {extra!r} extra: pip install 'lamina[{extra}]'",
                details={"extra": extra, "missing_module": module},
            ) from exc


def installed(extra: str) -> bool:
    """Whether the modules of ``extra`` are installed (found, not imported)."""
    return all(importlib.util.find_spec(module) is not None for module in EXTRAS[extra].modules)
