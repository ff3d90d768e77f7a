"""An embedder for any OpenAI-compatible ``/embeddings`` endpoint."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from lamina.embeddings.base import Vectors, normalize
from lamina.errors import ErrorCode, LaminaError
from lamina.retry import retry_after

log = logging.getLogger(__name__)


class OpenAIEmbedder:
    """POSTs batches to ``{base_url}/embeddings``; the key comes from the environment."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        api_key_env: str = "OPENAI_API_KEY",
        batch_size: int = 64,
        timeout_seconds: float = 30.0,
        send_dimensions: bool = True,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"embedding base_url {base_url!r} must start with http:// or https://",
            )
        self._model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._send_dimensions = send_dimensions
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout_seconds
        )

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        rows: list[Vectors] = []
        for start in range(0, len(texts), self._batch_size):
            rows.append(await self._embed_batch(list(texts[start : start + self._batch_size])))
        if not rows:
            return np.empty((0, self._dimensions), dtype=np.float32)
        return np.vstack(rows)

    async def _embed_batch(self, texts: list[str]) -> Vectors:
        body: dict[str, Any] = {"model": self._model, "input": texts}
        if self._send_dimensions:
            body["dimensions"] = self._dimensions
        try:
            response = await self._client.post("embeddings", json=body)
        except httpx.TransportError as exc:  # a timeout is one too
            what = "timed out" if isinstance(exc, httpx.TimeoutException) else "unreachable"
            raise LaminaError(
                ErrorCode.PROVIDER_ERROR, f"embedding provider {what}: {exc}"
            ) from exc
        status = response.status_code
        if status == 429:
            raise LaminaError(
                ErrorCode.RATE_LIMITED,
                "embedding provider rate limit reached",
                retry_after=retry_after(response.headers),
            )
        if status in (401, 403):
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"embedding provider refused the credentials (HTTP {status}); check the API "
                "key environment variable",
            )
        if status >= 500 or status == 408:
            raise LaminaError(
                ErrorCode.PROVIDER_ERROR, f"embedding provider failed with HTTP {status}"
            )
        if status >= 400:
            raise LaminaError(
                ErrorCode.EMBEDDING_FAILED,
                f"embedding provider rejected the request with HTTP {status}: "
                f"{response.text[:300]}",
            )
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            matrix = np.array([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise LaminaError(
                ErrorCode.EMBEDDING_FAILED, "embedding provider returned a malformed response"
            ) from exc
        if matrix.ndim != 2 or matrix.shape != (len(texts), self._dimensions):
            raise LaminaError(
                ErrorCode.EMBEDDING_FAILED,
                f"embedding provider returned shape {matrix.shape}, expected "
                f"({len(texts)}, {self._dimensions})",
            )
        return normalize(matrix)

    async def aclose(self) -> None:
        await self._client.aclose()
