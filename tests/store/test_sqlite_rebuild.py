"""After a deletion the embedded store's file is rebuilt when it closes (docs/memory.md,
"Forgetting"); a process that stops before it closes leaves the rebuild to the next one
that opens the file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from lamina import Lamina
from tests.conftest import fast_settings

#: Long texts: each fills pages of its own, which deleting it frees.
WORDS = "zorblaxian " * 900
#: A child process that deletes and stops without closing the store (os._exit).
CRASH = """
import os, sys
from pathlib import Path
from lamina import Lamina
from tests.conftest import fast_settings
ms = Lamina(fast_settings(Path(sys.argv[1])))
ms.__enter__()
for found in ms.memory.list(user_id="alice").items:
    ms.memory.delete(found.id)
os._exit(0)
"""


def _state(path: Path) -> tuple[int, bool]:
    """Free pages of the file, and whether it is marked to be rebuilt."""
    with sqlite3.connect(path) as conn:
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        marked = conn.execute("SELECT 1 FROM store_meta WHERE key = 'rebuild_pending'")
        return free, marked.fetchone() is not None


def _add(data: Path) -> None:
    with Lamina(fast_settings(data)) as ms:
        for n in range(6):
            ms.memory.add(f"{n} {WORDS}", layer="user", user_id="alice")
        ms.memory.add("Bob drinks green tea", layer="user", user_id="bob")


def test_closing_after_a_delete_rebuilds_the_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _add(data)
    path = data / "lamina.db"
    with Lamina(fast_settings(data)) as ms:
        for found in ms.memory.list(user_id="alice").items:
            ms.memory.delete(found.id)
        free, marked = _state(path)
        assert free > 0 and marked  # freed pages until the rebuild; marked for it
    assert _state(path) == (0, False)
    assert b"zorblaxian" not in path.read_bytes()
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    with Lamina(fast_settings(data)) as ms:
        assert [m.content for m in ms.memory.list(user_id="bob").items] == ["Bob drinks green tea"]


def test_a_process_stopped_before_closing_leaves_the_rebuild_to_the_next(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _add(data)
    path = data / "lamina.db"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", CRASH, str(data)], cwd=root, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert _state(path)[1]  # marked, not rebuilt
    # The next process rebuilds it when it closes, though it deletes nothing itself.
    with Lamina(fast_settings(data)) as ms:
        assert ms.memory.list(user_id="alice").items == []
    assert _state(path) == (0, False)
    assert b"zorblaxian" not in path.read_bytes()
