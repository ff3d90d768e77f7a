"""The local model's optimised graph kept on disk (lamina.embeddings.optimized): made by the
first process, mapped by the next, the same vectors to the bit, and never a reason to fail.
The model is loaded once per process, so each case runs in a process of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Embeds two texts with the embedder the settings name (the environment's), prints the
#: vectors' bytes as hex and whether the process maps a kept weights file.
_PROBE = """
import json, sys
from lamina.config import load_settings
from lamina.embeddings import build_embedder
vectors = build_embedder(load_settings().embedding).embed_sync(["hello world", "the cat sat"])
maps = open("/proc/self/maps").read()
print(json.dumps({"vectors": vectors.tobytes().hex(), "mapped": "weights.bin" in maps}))
"""


def _probe(cache: Path, **env: str) -> dict[str, object]:
    run_env = {**os.environ, "XDG_CACHE_HOME": str(cache), **env}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _kept(cache: Path) -> list[Path]:
    root = cache / "lamina" / "models"
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    """A cache directory of the test's own, removed afterwards (a kept graph is ~90 MB)."""
    path = tmp_path / "cache"
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


pytestmark = [
    pytest.mark.skipif(
        not Path("/proc/self/maps").exists(), reason="reads the process's memory maps (Linux)"
    ),
    pytest.mark.slow,  # a score of processes: scheduled first (tests/conftest.py)
]


def test_first_process_keeps_the_graph_and_the_next_maps_it_with_the_same_vectors(
    tmp_path: Path, cache: Path
) -> None:
    plain = _probe(tmp_path / "unused", LAMINA_EMBEDDING__MODEL_CACHE="false")
    assert not (tmp_path / "unused" / "lamina").exists()  # turned off: nothing written
    assert plain["mapped"] is False

    first = _probe(cache)
    [kept] = _kept(cache)
    assert sorted(p.name for p in kept.iterdir()) == ["manifest.json", "model.onnx", "weights.bin"]
    assert "-ort" in kept.name and (kept / "weights.bin").stat().st_size > 50_000_000
    assert not [p for p in kept.parent.iterdir() if p.name.startswith(".")]  # no staging left

    second = _probe(cache)
    assert second["mapped"] is True  # loaded from the kept graph, its weights mapped
    assert first["vectors"] == second["vectors"] == plain["vectors"]


def test_processes_starting_together_on_an_empty_cache_agree(cache: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _PROBE], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [json.loads(proc.communicate(timeout=120)[0]) for proc in procs]
    assert len({out["vectors"] for out in outs}) == 1
    [kept] = _kept(cache)
    assert not [p for p in kept.parent.iterdir() if p.name.startswith(".")]
    assert _probe(cache) == {**outs[0], "mapped": True}


def test_a_damaged_kept_graph_is_made_again(cache: Path) -> None:
    expected = _probe(cache)["vectors"]
    [kept] = _kept(cache)
    # A process killed while writing left its staging directory: cleared by the next load.
    abandoned = kept.parent / f".{kept.name}.123.abcdef01"
    abandoned.mkdir()
    (abandoned / "weights.bin").write_bytes(b"x" * 1000)
    os.utime(abandoned, (1_000_000, 1_000_000))
    recent = kept.parent / f".{kept.name}.124.abcdef02"
    recent.mkdir()  # another process writing now: left alone
    assert _probe(cache) == {"vectors": expected, "mapped": True}
    assert not abandoned.exists() and recent.exists()

    weights = kept / "weights.bin"
    size = weights.stat().st_size
    with weights.open("r+b") as handle:  # zeroed in the middle, its size kept (a bad disk)
        handle.seek(size // 4)
        handle.write(bytes(size // 4))
    assert _probe(cache)["vectors"] == expected
    assert _probe(cache) == {"vectors": expected, "mapped": True}

    with weights.open("r+b") as handle:  # cut short, as a full disk would leave it
        handle.truncate(size // 2)
    assert _probe(cache)["vectors"] == expected
    [again] = _kept(cache)
    manifest = json.loads((again / "manifest.json").read_text())
    assert (again / "weights.bin").stat().st_size == manifest["sizes"]["weights.bin"]
    assert _probe(cache)["mapped"] is True

    (again / "manifest.json").write_text("{not json", encoding="utf-8")
    assert _probe(cache)["vectors"] == expected
    assert _probe(cache) == {"vectors": expected, "mapped": True}


def test_another_model_file_or_runtime_is_kept_apart(tmp_path: Path) -> None:
    from lamina.embeddings.optimized import kept_graph_dir

    model = tmp_path / "pkg" / "model.onnx"
    model.parent.mkdir()
    model.write_bytes(b"x" * 100)
    first = kept_graph_dir(model, "1.31.1")
    os.utime(model, ns=(1, 1))  # a new release of the same size
    second = kept_graph_dir(model, "1.31.1")
    assert first is not None and second is not None and first != second
    assert kept_graph_dir(model, "1.32.0") != second
    assert second.parent.parent == Path(os.environ["XDG_CACHE_HOME"]) / "lamina"


def test_a_cache_that_cannot_be_written_still_embeds(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be")
    expected = _probe(tmp_path / "other", LAMINA_EMBEDDING__MODEL_CACHE="false")["vectors"]
    result = _probe(blocked)
    assert result["vectors"] == expected and result["mapped"] is False
    assert blocked.read_text() == "a file where the cache directory would be"
