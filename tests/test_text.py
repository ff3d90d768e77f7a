"""Text analysis (lamina.text) from several threads at once, as the SQLite store's worker
threads and the event loop analyse texts side by side: every stem is the one a thread alone
gets."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from lamina.text import analyze, stem

WORDS = [
    "running",
    "generalizations",
    "organizational",
    "connections",
    "hopefulness",
    "relational",
    "databases",
    "preferences",
]


@pytest.fixture
def switching_often() -> Iterator[None]:
    """Threads switch every microsecond: a stemmer shared between them shows at once."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def test_threads_stemming_at_once_get_the_stems_one_thread_gets(switching_often: None) -> None:
    alone = {word: stem.__wrapped__(word) for word in WORDS}  # past the cache of stems
    assert alone["running"] == "run" and alone["connections"] == "connect"
    got: list[tuple[str, str]] = []
    failures: list[BaseException] = []

    def work(step: int) -> None:
        try:
            for i in range(1000):
                word = WORDS[(i * step) % len(WORDS)]
                got.append((word, stem.__wrapped__(word)))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(step,)) for step in (1, 3, 5, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(got) == 4 * 1000
    assert [pair for pair in got if pair[1] != alone[pair[0]]] == []
    assert analyze("Running connections") == {"run": 1, "connect": 1}
