"""What a database says about itself: its schema migrations, the embedding model it was
built with, and what a backend can do."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from lamina.backend import StoreCapabilities
from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError


def check_model(meta: dict[str, str], embedder: Embedder, built: str, instead: str) -> None:
    """CONFIGURATION_ERROR unless ``embedder`` is the model the database was built with
    (``store_meta``). ``built`` names the database ("the store x"), ``instead`` the way out."""
    model, dims = embedder.model_id, embedder.dimensions
    if meta["embedding_model"] != model or meta["embedding_dimensions"] != str(dims):
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"{built} was built with embedding model {meta['embedding_model']} "
            f"({meta['embedding_dimensions']}-d); the configured embedder is {model} "
            f"({dims}-d). Use the same model or {instead}.",
            details={
                "store_model": meta["embedding_model"],
                "store_dimensions": int(meta["embedding_dimensions"]),
                "embedder_model": model,
                "embedder_dimensions": dims,
            },
        )


def capabilities(embedder: Embedder) -> StoreCapabilities:
    """Both backends search by vector (cosine) and keyword, and write in bulk."""
    return StoreCapabilities(
        vector_search=True,
        keyword_search=True,
        embedding_dimensions=embedder.dimensions,
        distance_metrics=("cosine",),
        bulk_operations=True,
    )


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sql: str


def pending_migrations(package: str, done: set[int], target: int | None) -> list[Migration]:
    """The ``NNNN_*.sql`` files of ``package`` not applied yet, in order, up to ``target``
    (None: all; tests pin older schemas)."""
    files = sorted(
        (f for f in resources.files(package).iterdir() if f.name.endswith(".sql")),
        key=lambda f: f.name,
    )
    pending = []
    for file in files:
        number = int(file.name.split("_", 1)[0])
        if number not in done and (target is None or number <= target):
            pending.append(Migration(number, file.name, file.read_text(encoding="utf-8")))
    return pending
