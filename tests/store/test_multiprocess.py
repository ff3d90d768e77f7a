"""Several real processes writing one SQLite file at once lose nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from lamina import Lamina
from tests.conftest import fast_settings

WORKER = textwrap.dedent(
    """
    import json, sys
    from lamina import Lamina, load_settings
    data_dir, user, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    settings = load_settings(data_dir=data_dir, retry={"initial_delay": 0.01})
    kept, deleted = [], []
    with Lamina(settings) as ms:
        for i in range(count):
            m = ms.memory.add(f"{user} wrote memory number {i}", layer="project",
                              project_id="shared", metadata={"writer": user, "i": i})
            if i % 5 == 0:
                ms.memory.update(m.id, metadata={"updated": True})
            if i % 7 == 0:
                ms.memory.delete(m.id)
                deleted.append(m.id)
            else:
                kept.append(m.id)
            ms.memory.search(f"{user} memory", project_id="shared", threshold=0.0, limit=3)
    print(json.dumps({"kept": kept, "deleted": deleted}))
    """
)


def test_concurrent_processes_lose_nothing(data_dir: Path) -> None:
    count = 40
    with Lamina(fast_settings(data_dir)) as ms:
        ms.memory.add("seed memory", layer="project", project_id="shared")
        assert len(ms.memory.search("seed", project_id="shared", threshold=0.0)) == 1
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(data_dir), user, str(count)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for user in ("writer-a", "writer-b", "writer-c")
        ]
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err
            results.append(json.loads(out))
        kept = {mid for r in results for mid in r["kept"]}
        deleted = {mid for r in results for mid in r["deleted"]}
        page = ms.memory.list(project_id="shared", layers=["project"], limit=1000)
        assert {m.id for m in page.items} == kept | {page.items[-1].id}
        assert page.total_count == len(kept) + 1
        updated = ms.memory.list(project_id="shared", filters={"updated": True}, limit=1000)
        assert updated.total_count == len([i for i in range(count) if i % 5 == 0 and i % 7]) * 3
        for mid in list(deleted)[:5]:
            assert [e.operation.value for e in ms.memory.history(mid)][-1] == "delete"
        # The index this process loaded before the writers started has caught up with them.
        hits = ms.memory.search(
            "writer-b wrote memory number 13",
            project_id="shared",
            layers=["project"],
            threshold=0.0,
            limit=50,
        )
        assert hits[0].memory.content == "writer-b wrote memory number 13"
        found = {
            h.memory.id
            for h in ms.memory.search(
                "wrote memory number",
                project_id="shared",
                threshold=0.0,
                limit=1000,
                layers=["project"],
                mode="semantic",
            )
        }
        assert not found & deleted
