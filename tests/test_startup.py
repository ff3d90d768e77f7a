"""Start-up stays instant (issue 35): ``import lamina`` and the CLI's ``--version`` and
``--help`` import no heavy dependency; the public names and the commands load on first use,
and ``--help`` lists each command with the command's own short help."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import click
import pytest

import lamina
from lamina import Lamina
from lamina.cli import COMMANDS, cli
from lamina.cli.lazy import LazyGroup
from lamina.embeddings.local import LocalEmbedder, load_model, preload
from lamina.tokens import ExactTokenCounter

#: What a start-up must not pay for until it is used (top-level package names).
HEAVY = (
    "numpy",
    "onnxruntime",
    "tokenizers",
    "dulwich",
    "snowballstemmer",
    "pydantic",
    "pydantic_settings",
    "httpx",
    "httpx2",
    "starlette",
    "uvicorn",
    "a2a",
    "mcp",
    "rich",
    "sqlite3",
    "psycopg",
    "prometheus_client",
    "toktok",
    "yaml",
    "filelock",
)


def _imported_after(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter: every module it left imported ("modules") and
    what it printed ("out")."""
    probe = (
        "import sys, json, io, contextlib\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"{''.join('    ' + line + chr(10) for line in code.splitlines())}"
        "names = sorted(sys.modules)\n"
        "print(json.dumps({'modules': names, 'out': out.getvalue()}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


LAMINA = Path(sys.executable).parent / "lamina"


def _names(report: dict[str, object]) -> list[str]:
    modules = report["modules"]
    assert isinstance(modules, list)
    return [str(m) for m in modules]


def _heavy(modules: object) -> list[str]:
    assert isinstance(modules, list)
    return sorted({m for m in modules if m.split(".")[0] in HEAVY})


def test_import_lamina_imports_nothing_heavy() -> None:
    report = _imported_after("import lamina")
    assert _heavy(report["modules"]) == []
    assert [m for m in report["modules"] if isinstance(m, str) and m.startswith("lamina")] == [
        "lamina"
    ]


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_nothing_heavy(flag: str) -> None:
    code = (
        "from lamina.cli import main\n"
        "try:\n"
        f"    main([{flag!r}])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code"
    )
    report = _imported_after(code)
    assert _heavy(report["modules"]) == []
    commands = [m for m in report["modules"] if isinstance(m, str) and m.startswith("lamina.")]
    assert commands == ["lamina.cli", "lamina.cli._common", "lamina.cli.lazy", "lamina.errors"]
    out = report["out"]
    assert isinstance(out, str)
    if flag == "--version":
        assert out == f"lamina, version {lamina.__version__}\n"
        assert lamina.__version__ == version("lamina")  # the installed distribution's
        assert "importlib.metadata" not in report["modules"]  # its look-up is not instant
    else:
        assert all(f"  {name} " in out for name in COMMANDS)


def test_a_public_name_loads_on_first_use_and_every_name_resolves() -> None:
    report = _imported_after("import lamina\nlamina.ErrorCode")
    assert _heavy(report["modules"]) == []  # errors.py needs nothing heavy
    assert sorted(lamina.__all__) == sorted({*lamina._EXPORTS, "__version__"})
    for name in lamina.__all__:
        value = getattr(lamina, name)
        assert name == "__version__" or getattr(value, "__name__", name) == name
    assert set(lamina.__all__) <= set(dir(lamina))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        lamina.Nope  # noqa: B018


def test_help_lists_each_command_with_its_own_short_help() -> None:
    """The kept short help of every command is the one click derives from the command's
    docstring, and ``lamina --help`` reads exactly as the same group with every command
    imported would."""
    lazy = LazyGroup(name="lamina", params=cli.params, help=cli.help, lazy=COMMANDS)
    eager = click.Group(name="lamina", params=cli.params, help=cli.help)
    for name, entry in COMMANDS.items():
        command = entry.load()
        assert command.name == name
        assert entry.short_help == command.get_short_help_str(10_000), name
        eager.add_command(command)
    for width in (80, 120, 200):
        text = lazy.get_help(click.Context(lazy, info_name="lamina", terminal_width=width))
        assert "Commands:" in text
        assert text == eager.get_help(
            click.Context(eager, info_name="lamina", terminal_width=width)
        )
    assert lazy.commands == {}  # nothing was imported to print it
    assert lazy.get_command(click.Context(lazy), "memory") is COMMANDS["memory"].load()
    assert lazy.list_commands(click.Context(lazy)) == sorted(COMMANDS)


def test_a_search_finds_the_same_in_a_fresh_cli_process_as_in_the_library(
    tmp_path: Path,
) -> None:
    """The CLI search loads the model in the background while lamina is imported and the
    store opened: the hits are those of the same search through the library."""
    data = tmp_path / "d"
    with Lamina(data_dir=data) as ms:
        for text in ("Dana prefers PostgreSQL for analytics", "Omar likes tea", "Sven uses vim"):
            ms.memory.add(text, layer="user", user_id="u")
        expected = ms.memory.search("which database does Dana prefer", user_id="u")
    assert next(iter(expected)).memory.content.startswith("Dana")
    done = subprocess.run(
        [
            str(LAMINA),
            "--data-dir",
            str(data),
            "memory",
            "search",
            "which database does Dana prefer",
            "--user-id",
            "u",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout)["results"]
    assert [(h["memory"]["id"], round(h["score"], 6)) for h in found] == [
        (h.memory.id, round(h.score, 6)) for h in expected
    ]


def test_a_keyword_search_loads_neither_the_model_nor_git(tmp_path: Path) -> None:
    """A Lamina that only reads by keyword imports no onnxruntime, tokenizers, dulwich,
    filelock or yaml: they load when the model or the knowledge repository is used."""
    code = (
        "from lamina import Lamina\n"
        f"with Lamina(data_dir={str(tmp_path / 'd')!r}) as ms:\n"
        "    page = ms.memory.search('tea', user_id='u', mode='keyword')\n"
        "    print(len(list(page)))"
    )
    report = _imported_after(code)
    assert report["out"] == "0\n"
    late = ("onnxruntime", "tokenizers", "dulwich", "filelock", "yaml")
    assert [m for m in _names(report) if m.split(".")[0] in late] == []


def test_the_preloaded_model_is_the_one_embeddings_use() -> None:
    thread = preload()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert load_model() is load_model()
    assert LocalEmbedder().embed_sync(["tea"]).shape == (1, 384)


def test_the_token_counter_loads_its_vocabulary_once_when_threads_count_first() -> None:
    counter = ExactTokenCounter()
    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(counter.count, ["hello world"] * 16))
    assert counts == [2] * 16
    assert counter.count_many(["hello world", "how many tokens?"]) == [2, 4]
    with pytest.raises(KeyError, match="unknown encoding"):
        ExactTokenCounter("no_such_encoding").count("x")


def test_a_started_lamina_has_loaded_no_model_stemmer_or_git(tmp_path: Path) -> None:
    """What a server does before it answers (build the runtime, open the store) loads no
    embedding model, token vocabulary, stemmer, git or YAML: the first call that needs one
    loads it."""
    code = (
        "import asyncio\n"
        "from lamina.runtime import AsyncLamina\n"
        "async def main():\n"
        f"    ms = AsyncLamina(data_dir={str(tmp_path / 'd')!r})\n"
        "    await ms.start()\n"
        "    await ms.close()\n"
        "asyncio.run(main())"
    )
    report = _imported_after(code)
    late = ("onnxruntime", "tokenizers", "snowballstemmer", "dulwich", "filelock", "yaml")
    assert [m for m in _names(report) if m.split(".")[0] in late] == []


def test_the_command_modules_import_no_rich_until_something_is_drawn() -> None:
    """rich loads when a table or a bar is drawn: not for ``--json`` output, nor before a
    search has started loading its model."""
    modules = sorted({entry.path.partition(":")[0] for entry in COMMANDS.values()})
    report = _imported_after("".join(f"import {module}\n" for module in modules))
    assert [m for m in _names(report) if m.split(".")[0] == "rich"] == []
    drawn = _imported_after("from lamina.cli.output import cell\ncell('x')")
    assert "rich.text" in _names(drawn)


def test_a_preload_asked_to_import_first_returns_once_the_model_needs_no_gil() -> None:
    """``imports_first``: the caller's own imports then run beside the ONNX session's
    build, not against the model's imports for the GIL."""
    code = (
        "import sys\n"
        "from lamina.embeddings.local import preload\n"
        "thread = preload(imports_first=True)\n"
        "print(sorted(m for m in ('onnxruntime', 'tokenizers') if m in sys.modules))\n"
        "thread.join()"
    )
    assert _imported_after(code)["out"] == "['onnxruntime', 'tokenizers']\n"


def test_the_memory_commands_load_nothing_heavy_before_a_search_starts_its_model() -> None:
    """``lamina memory search`` starts loading the model when its command runs: loading the
    ``memory`` group (its export and import commands included) imports neither numpy nor
    pydantic nor the settings, which the model's load would otherwise wait behind."""
    report = _imported_after("import lamina.cli.memory")
    assert _heavy(report["modules"]) == []
    assert [m for m in _names(report) if m.split(".")[0] in ("numpy", "pydantic")] == []
    assert "lamina.config" not in _names(report)
    assert "lamina.memory.records" not in _names(report)
