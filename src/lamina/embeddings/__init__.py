"""Embedders: the Embedder protocol and its implementations."""

from __future__ import annotations

from lamina.config import EmbeddingSettings
from lamina.embeddings.base import Embedder, Vectors, normalize
from lamina.errors import ErrorCode, LaminaError
from lamina.extras import require

__all__ = ["Embedder", "Vectors", "build_embedder", "normalize", "preload"]


def preload(settings: EmbeddingSettings, *, imports_first: bool = False) -> None:
    """Start loading the local model of these settings in the background (nothing for a
    remote embedder): for a door that knows it will embed soon, such as a CLI search.
    ``imports_first``: return once the load's imports are done (lamina.embeddings.local)."""
    if settings.provider == "local":
        from lamina.embeddings.local import preload as load_in_background

        load_in_background(
            settings.threads, imports_first=imports_first, model_cache=settings.model_cache
        )


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    """The embedder named by the settings."""
    if settings.provider == "local":
        if settings.model not in (None, "all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8"):
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"the local embedder only runs all-MiniLM-L6-v2, not {settings.model!r}",
            )
        from lamina.embeddings.local import LocalEmbedder

        return LocalEmbedder(
            batch_size=settings.batch_size,
            threads=settings.threads,
            model_cache=settings.model_cache,
        )
    require("openai", "The OpenAI-compatible embedder")
    from lamina.embeddings.openai import OpenAIEmbedder

    if not settings.base_url or not settings.model or not settings.dimensions:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            "the openai embedder needs embedding.base_url, embedding.model and "
            "embedding.dimensions",
        )
    return OpenAIEmbedder(
        base_url=settings.base_url,
        model=settings.model,
        dimensions=settings.dimensions,
        api_key_env=settings.api_key_env,
        batch_size=settings.batch_size,
        timeout_seconds=settings.timeout_seconds,
    )
