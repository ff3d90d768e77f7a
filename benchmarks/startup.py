"""Start-up (issue 35): how long a fresh process takes to ``import lamina``, print
``lamina --version`` and ``--help``, search a small store from cold (``lamina memory search``)
and answer an MCP client's initialize (``lamina mcp`` over stdio). Each run is a new process;
prints JSON with the median, min and max wall seconds of each figure, and the median CPU
seconds (user + system) of the process, steadier than wall time on a shared machine; for
the MCP server also the CPU seconds it had used when it answered (``cpu_at_answer``: what
it loads after answering is in its whole-process CPU, not in its wait).

    uv run python -m benchmarks.startup [--runs 7] [--baseline DIR] [--only NAME,...]

``--baseline DIR`` pairs another source tree against this one in the same run, A B A B…
(``git archive main src | tar -x -C /tmp/base`` then ``--baseline /tmp/base``): its ``src``
goes first on PYTHONPATH, with the same interpreter and dependencies; the ratios are
this tree's median over the baseline's. The store (200 memories, the local model's
embeddings) is built once, by this tree, in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.corpus import sentences

LAMINA = Path(sys.executable).parent / "lamina"
QUERY = "which database does the team prefer"


def build_store(data_dir: Path, count: int) -> None:
    from lamina import Lamina

    with Lamina(data_dir=data_dir) as ms:
        ms.memory.bulk_add(
            [{"content": text, "layer": "user", "user_id": "u"} for text in sentences(count)]
        )


#: Wall seconds, CPU seconds of the process, and for the MCP server the CPU seconds it had
#: used when its initialize answer came (Linux: /proc), the rest being its background loads.
Sample = tuple[float, float, float | None]


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(args: list[str], env: dict[str, str]) -> Sample:
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run(args, env=env, check=True, capture_output=True)
    return time.perf_counter() - start, _cpu() - cpu, None


def _children_cpu() -> float | None:
    """CPU seconds used so far by this process's children (None without /proc)."""
    proc, used, me = Path("/proc"), 0.0, str(os.getpid())
    if not proc.is_dir():
        return None
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[1] == me:  # ppid; utime and stime in clock ticks
            used += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def mcp_ready(data_dir: Path, env: dict[str, str]) -> Sample:
    """Seconds from starting ``lamina mcp`` to the answer of its initialize request; the
    CPU seconds of the server process as a whole (initialize, then the exit it is asked
    for when the client closes) and when it answered."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def initialize() -> tuple[float, float | None]:
        params = StdioServerParameters(
            command=str(LAMINA), args=["--data-dir", str(data_dir), "mcp"], env=env
        )
        start = time.perf_counter()
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return time.perf_counter() - start, _children_cpu()

    cpu = _cpu()
    with open(os.devnull, "w") as quiet:  # its start-up line on standard error
        wall, ready = asyncio.run(initialize())
    return wall, _cpu() - cpu, ready


def figures(data_dir: Path) -> dict[str, Callable[[dict[str, str]], Sample]]:
    search = [
        str(LAMINA),
        "--data-dir",
        str(data_dir),
        "memory",
        "search",
        QUERY,
        "--user-id",
        "u",
        "--json",
    ]
    return {
        "import_lamina": lambda env: timed([sys.executable, "-c", "import lamina"], env),
        "cli_version": lambda env: timed([str(LAMINA), "--version"], env),
        "cli_help": lambda env: timed([str(LAMINA), "--help"], env),
        "cli_search_cold": lambda env: timed(search, env),
        "mcp_initialize": lambda env: mcp_ready(data_dir, env),
    }


def summary(samples: list[Sample]) -> dict[str, float]:
    walls = [wall for wall, _, _ in samples]
    figures = {
        "median_s": round(statistics.median(walls), 3),
        "min_s": round(min(walls), 3),
        "max_s": round(max(walls), 3),
        "cpu_median_s": round(statistics.median(cpu for _, cpu, _ in samples), 3),
    }
    ready = [r for _, _, r in samples if r is not None]
    if ready:
        figures["cpu_at_answer_median_s"] = round(statistics.median(ready), 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--runs", type=int, default=7, help="Fresh processes per figure.")
    parser.add_argument("--memories", type=int, default=200, help="Memories in the store.")
    parser.add_argument("--baseline", type=Path, default=None, help="A source tree to pair.")
    parser.add_argument("--only", default=None, help="Comma-separated figures (default: all).")
    args = parser.parse_args()
    # Bytecode is written (the warm-up runs write it): an installed package has it, and
    # without it every run would compile lamina and its dependencies from source.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LAMINA_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    trees = {"this": env}
    if args.baseline is not None:
        src = args.baseline / "src" if (args.baseline / "src").is_dir() else args.baseline
        trees = {"baseline": {**env, "PYTHONPATH": str(src.resolve())}, "this": env}
    result: dict[str, Any] = {"benchmark": "startup", "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        build_store(data_dir, args.memories)
        result["memories"] = args.memories
        for name, measure in figures(data_dir).items():
            if args.only is not None and name not in args.only.split(","):
                continue
            for tree_env in trees.values():  # a warm-up run each: the disk cache, not lamina
                measure(tree_env)
            samples: dict[str, list[Sample]] = {tree: [] for tree in trees}
            for _ in range(args.runs):
                for tree, tree_env in trees.items():
                    samples[tree].append(measure(tree_env))
            result[name] = {tree: summary(s) for tree, s in samples.items()}
            if args.baseline is not None:
                this, base = result[name]["this"], result[name]["baseline"]
                result[name]["this_over_baseline"] = round(this["median_s"] / base["median_s"], 3)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
