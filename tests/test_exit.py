"""Exit hygiene: a script that forgets ``close()`` exits quietly and loses nothing; close is
idempotent and safe from any thread."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from tests.conftest import fast_settings

ROOT = Path(__file__).resolve().parents[1]
NOISE = ("Task was destroyed", "Traceback", "Exception ignored", "Error", "Warning", "never")


def run_script(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_quiet(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr[-3000:]
    # -X dev reports slow event-loop callbacks on stderr ("Executing <Task ...> took 0.1
    # seconds"): timing, not noise about the exit.
    lines = [line for line in done.stderr.splitlines() if not line.startswith("Executing <")]
    assert not [line for line in lines if any(word in line for word in NOISE)], done.stderr
    assert lines == [], done.stderr


def dogs(i: int) -> str:
    return f"background fact {i}: the dog called Rex{i} sleeps in the barn"


FORGETS_CLOSE = """
import sys
from lamina import Lamina

ms = Lamina(data_dir=sys.argv[1])
for i in range(5):
    ms.memory.add(f"fact {i}: cats like the sun", layer="user", user_id="u1")
for i in range(int(sys.argv[2])):
    ms.memory.add(f"background fact {i}: the dog called Rex{i} sleeps in the barn",
                  layer="user", user_id="u1", background_embedding=True)
ms.knowledge.create("adr", "Use SQLite", layer="company")

def another() -> None:
    # A second facade nobody keeps a reference to.
    other = Lamina(data_dir=sys.argv[1], tenant_id="other")
    other.memory.add("the other tenant's note", layer="user", user_id="u2",
                     background_embedding=True)

another()
print("added", flush=True)
"""


def test_a_script_that_forgets_close_exits_quietly_and_embeds_everything(
    data_dir: Path,
) -> None:
    done = run_script(FORGETS_CLOSE, str(data_dir), "120")
    assert_quiet(done)
    assert done.stdout.strip() == "added"
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.memory.list(user_id="u1", limit=1000).total_count == 125
        # The exit closed the facade: the embedding buffer finished before the store closed.
        assert ms.memory.embed_pending() == 0
        hits = ms.memory.search(dogs(119), user_id="u1", limit=1)
        assert [h.memory.content for h in hits] == [dogs(119)]
        assert [i.title for i in ms.knowledge.list(status="draft").items] == ["Use SQLite"]
        assert ms.memory.embed_pending(tenant_id="other") == 0
        assert ms.memory.list(user_id="u2", tenant_id="other").total_count == 1


CRASHES = """
import os, sys
from lamina import Lamina

ms = Lamina(data_dir=sys.argv[1])
for i in range(int(sys.argv[2])):
    ms.memory.add(f"background fact {i}: the dog called Rex{i} sleeps in the barn",
                  layer="user", user_id="u1", background_embedding=True)
os._exit(0)  # no exit hooks at all, as in a crash
"""


def test_embeddings_left_pending_by_a_crash_stay_in_the_store(data_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASHES, str(data_dir), "60"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.memory.list(user_id="u1", limit=1000).total_count == 60
        ms.memory.embed_pending()
        assert ms.memory.embed_pending() == 0
        for i in (0, 59):
            hits = ms.memory.search(dogs(i), user_id="u1", limit=1)
            assert [h.memory.content for h in hits] == [dogs(i)]


CLOSES_TWICE = """
import sys, threading
from lamina import Lamina

ms = Lamina(data_dir=sys.argv[1])
ms.memory.add("closed from a thread", layer="user", user_id="u1", background_embedding=True)
closers = [threading.Thread(target=ms.close) for _ in range(3)]
for t in closers:
    t.start()
for t in closers:
    t.join()
ms.close()
with Lamina(data_dir=sys.argv[1]) as again:
    again.memory.add("closed by with", layer="user", user_id="u1")
print("ok", flush=True)
"""


def test_explicit_close_from_threads_and_with_leave_nothing_for_the_exit(data_dir: Path) -> None:
    done = run_script(CLOSES_TWICE, str(data_dir))
    assert_quiet(done)
    assert done.stdout.strip() == "ok"
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.memory.list(user_id="u1").total_count == 2
        assert ms.memory.embed_pending() == 0


ASYNC_FORGETS_CLOSE = """
import asyncio, sys
from lamina import AsyncLamina

async def main() -> None:
    ms = AsyncLamina(data_dir=sys.argv[1])
    for i in range(20):
        await ms.memory.add(f"background fact {i}: the dog called Rex{i} sleeps in the barn",
                            layer="user", user_id="u1", background_embedding=True)

asyncio.run(main())
"""


def test_async_lamina_without_close_loses_nothing(data_dir: Path) -> None:
    """AsyncLamina lives on its caller's loop; asyncio.run cancels the embedding buffer at
    the end and what it did not embed stays pending in the store."""
    done = subprocess.run(
        [sys.executable, "-c", ASYNC_FORGETS_CLOSE, str(data_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.memory.list(user_id="u1").total_count == 20
        ms.memory.embed_pending()
        hits = ms.memory.search(dogs(19), user_id="u1", limit=1)
        assert [h.memory.content for h in hits] == [dogs(19)]


def test_close_is_idempotent_and_a_closed_facade_says_so(data_dir: Path) -> None:
    ms = Lamina(fast_settings(data_dir))
    ms.memory.add("one", layer="user", user_id="u1", background_embedding=True)
    worker = threading.Thread(target=ms.close)
    worker.start()
    worker.join()
    ms.close()
    with pytest.raises(LaminaError) as caught:
        ms.memory.list(user_id="u1")
    assert caught.value.code is ErrorCode.CONFIGURATION_ERROR
    assert "closed" in caught.value.message


def test_a_blocking_call_on_the_loop_thread_fails_instead_of_hanging(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:

        async def inside() -> str:
            try:
                ms.memory.list(user_id="u1")
            except LaminaError as exc:
                return exc.code.value
            return "no error"

        future = asyncio.run_coroutine_threadsafe(inside(), ms._loop)
        assert future.result(30) == ErrorCode.CONFIGURATION_ERROR.value
        assert ms.memory.list(user_id="u1").total_count == 0
