from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina import Lamina, load_settings
from lamina.config import Settings
from lamina.embeddings.local import load_runtime
from tests.fakes.openai_server import FakeOpenAI

# Test modules import usearch themselves; onnxruntime imported after it crashes the process
# (lamina/store/sqlite/graph.py), so it is imported first, as lamina's own graphs do.
load_runtime()


def fast_settings(data_dir: Path, **overrides: object) -> Settings:
    """Embedded defaults with retries that wait milliseconds, not seconds."""
    retry: dict[str, object] = {
        "max_retries": 3,
        "initial_delay": 0.01,
        "multiplier": 2.0,
        "max_delay": 0.1,
    }
    retry.update(overrides.pop("retry", {}))  # type: ignore[call-overload]
    return load_settings(data_dir=data_dir, retry=retry, **overrides)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files holding a slow test first, each file's tests kept together and in order:
    under ``--dist loadfile --no-loadscope-reorder`` (scripts/test) the workers take the
    long files (whole minutes on one worker) at the start, and the many short ones fill in
    behind them, instead of one long file starting last and running on alone."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def _shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the run's workers, beside their temporary directories (not
    the user's): the local model's kept optimised graph (lamina.embeddings.optimized,
    ~90 MB) is made once there and mapped by every process the tests start, as on a user's
    machine, not made again in each test's HOME."""
    return tmp_path_factory.getbasetemp().parent / "shared-cache"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, _shared_cache: Path) -> None:
    for key in list(os.environ):
        if key.startswith(("LAMINA_", "XDG_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(_shared_cache))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "memdata"


@pytest.fixture
def ms(data_dir: Path) -> Iterator[Lamina]:
    with Lamina(fast_settings(data_dir)) as instance:
        yield instance


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def openai_settings(data_dir: Path, server: FakeOpenAI, **overrides: object) -> Settings:
    return fast_settings(
        data_dir,
        embedding={
            "provider": "openai",
            "base_url": server.base_url,
            "model": "fake-embed",
            "dimensions": server.dims,
        },
        **overrides,
    )


def chat_settings(data_dir: Path, server: FakeOpenAI, **overrides: object) -> Settings:
    """Embedded defaults whose chat model (``llm``) is the fake server's, without retries
    (``llm.max_retries`` 0; retries given wait milliseconds) and with a 1 s timeout."""
    llm = {
        "model": "fake-chat",
        "base_url": server.base_url,
        "max_retries": 0,
        "retry_initial_delay": 0.01,
    }
    llm.update(overrides.pop("llm", {}))  # type: ignore[call-overload]
    return fast_settings(data_dir, llm={"timeout_seconds": 1, **llm}, **overrides)
