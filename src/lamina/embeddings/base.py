"""The Embedder protocol: text in, unit-length float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

#: One embedding (a row) and a matrix of them: float32, unit length.
Vector = npt.NDArray[np.float32]
Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. Implementations return L2-normalised rows."""

    @property
    def model_id(self) -> str:
        """A stable name of the model; stores refuse vectors from another model."""
        ...

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, in order; raises LaminaError on failure."""
        ...

    async def aclose(self) -> None: ...


def normalize(vectors: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero)."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)
