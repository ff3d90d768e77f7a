"""Runnable examples of a docs page: blocks marked ``<!-- example: name -->``, each run as a
script in a fresh directory, against the fake OpenAI-compatible server (LLM_BASE_URL), with no
LAMINA_* variable of the test run leaking in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

_EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\s*```python\n(.*?)\n```", re.S)


def python_examples(doc: Path) -> dict[str, str]:
    """The page's marked Python examples, by name."""
    return dict(_EXAMPLE.findall(doc.read_text(encoding="utf-8")))


def run_example(
    name: str, source: str, tmp_path: Path, llm_base_url: str
) -> subprocess.CompletedProcess[str]:
    """``source`` run as ``example_<name>.py`` in ``tmp_path`` (also its HOME)."""
    script = tmp_path / f"example_{name.replace('-', '_')}.py"
    script.write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("LAMINA_")},
            "LLM_BASE_URL": llm_base_url,
            "HOME": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
