"""The tenant's knowledge write lock: processes and threads exclude each other, a waiter gives
up after ``lock_timeout`` with CONFLICT, and gets the lock once the holder lets go."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.knowledge.gitstore import GitStore
from tests.conftest import fast_settings

HOLDER = """
import sys
from pathlib import Path
from lamina.knowledge.gitstore import GitStore
store = GitStore(Path(sys.argv[1]))
handle = store.acquire(sys.argv[2])
print("held", flush=True)
sys.stdin.readline()
store.release(handle)
print("released", flush=True)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding tenant ``acme``'s lock under ``tmp_path / 'knowledge'`` until
    a line is written to its stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "knowledge"), "acme"],
        cwd=Path(__file__).resolve().parents[2],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "held", proc.stderr and proc.stderr.read()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def let_go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "released"


def test_a_process_waits_for_another_then_times_out_then_gets_the_lock(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    store = GitStore(tmp_path / "knowledge", lock_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(LaminaError) as caught:
        store.acquire("acme")
    waited = time.monotonic() - started
    assert caught.value.code is ErrorCode.CONFLICT and caught.value.retryable
    assert "acme" in caught.value.message and "0.3 s" in caught.value.message
    assert 0.25 <= waited < 5
    # Another tenant's lock is a different file.
    store.release(store.acquire("other"))
    let_go(holder)
    handle = store.acquire("acme")
    store.release(handle)
    assert holder.wait(timeout=30) == 0


def test_a_knowledge_write_meets_the_lock_of_another_process(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    settings = fast_settings(tmp_path, knowledge={"lock_timeout": 0.3})
    with Lamina(settings) as ms:
        with pytest.raises(LaminaError) as caught:
            ms.knowledge.create("adr", "Blocked", layer="company", tenant_id="acme")
        assert caught.value.code is ErrorCode.CONFLICT
        assert ms.knowledge.list(tenant_id="acme").items == []
        let_go(holder)
        change = ms.knowledge.create("adr", "Written", layer="company", tenant_id="acme")
        assert ms.knowledge.get(change.item.id, tenant_id="acme").title == "Written"


def test_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    store = GitStore(tmp_path / "knowledge", lock_timeout=0.2)
    handle = store.acquire("acme")
    # The same thread again: not re-entrant, it waits like anyone else.
    with pytest.raises(LaminaError) as caught:
        store.acquire("acme")
    assert caught.value.code is ErrorCode.CONFLICT
    # Another thread, even with its own GitStore on the same directory.
    errors: list[LaminaError] = []

    def contend() -> None:
        try:
            GitStore(tmp_path / "knowledge", lock_timeout=0.2).acquire("acme")
        except LaminaError as exc:
            errors.append(exc)

    worker = threading.Thread(target=contend)
    worker.start()
    worker.join()
    assert [e.code for e in errors] == [ErrorCode.CONFLICT]
    # Released from another thread than the one that took it (as the async service does).
    releaser = threading.Thread(target=store.release, args=(handle,))
    releaser.start()
    releaser.join()
    store.release(store.acquire("acme"))


def test_the_lock_serialises_critical_sections_across_threads(tmp_path: Path) -> None:
    store = GitStore(tmp_path / "knowledge", lock_timeout=30)
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(20):
            with store.locked("acme"):
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.001)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1
