"""What a database says about itself: its schema migrations, the embedding model its vectors
come from, and what a backend can do."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib import resources

from lamina.backend import StoreCapabilities
from lamina.embeddings.base import Embedder
from lamina.memory.ports import EmbeddingStatus

log = logging.getLogger(__name__)


class EmbeddingState:
    """What a store knows of its vectors' model: read from ``store_meta`` when it opens,
    changed by ``reembed``. Shared by the store's memory and context-item code."""

    def __init__(self, embedder: Embedder) -> None:
        model, dims = embedder.model_id, embedder.dimensions
        self.status = EmbeddingStatus(model, dims, model, dims)

    def load(self, meta: dict[str, str]) -> None:
        model, dims = self.status.model, self.status.dimensions
        self.status = EmbeddingStatus(
            meta["embedding_model"],
            int(meta["embedding_dimensions"]),
            model,
            dims,
            in_progress=meta.get(REEMBED_TARGET) is not None,
        )
        if self.status.reembed_needed:
            log.warning(
                "the store's vectors come from %s (%d-d), the configured embedder is %s (%d-d): "
                "semantic search is off until `lamina memory reembed` has run",
                self.status.store_model,
                self.status.store_dimensions,
                model,
                dims,
            )

    @property
    def stale(self) -> bool:
        return self.status.reembed_needed


#: store_meta keys of a re-embedding under way: its target ("model:dimensions"), and the
#: target whose context-item vectors were already cleared.
REEMBED_TARGET = "reembed_target"
REEMBED_ITEMS_CLEARED = "reembed_items_cleared"


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
