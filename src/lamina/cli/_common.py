"""What every command module shares: the CLI state, the common options, JSON parsing and
printing, and the error exit. Imports no command module."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from lamina.errors import ErrorCode, LaminaError

if TYPE_CHECKING:
    # Imported where used: `lamina --help` and `--version` load neither settings nor stores.
    from lamina.config import Settings
    from lamina.facade import Lamina

__all__ = [
    "IDENTIFIERS",
    "State",
    "any_tags_option",
    "cursor_option",
    "emit",
    "fail",
    "identifier_options",
    "ids",
    "json_option",
    "options",
    "parse_json",
    "path_option",
    "read_text",
    "tag_option",
]

F = TypeVar("F", bound=Callable[..., Any])
IDENTIFIERS = ("agent_id", "user_id", "session_id", "project_id", "team_id", "org_id", "company_id")


class State:
    """The root options (data directory, database, config file, tenant) and the Lamina they
    open, on first use; commands get it with ``@click.pass_obj``."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self._ms: Lamina | None = None

    def settings(self, **overrides: Any) -> Settings:
        """The Settings the root options give, ``overrides`` that are not None winning
        (without opening anything)."""
        from lamina.config import load_settings

        options = {**self.options, **{k: v for k, v in overrides.items() if v is not None}}
        return load_settings(options.pop("config_file"), **options)

    def preload_embedder(self) -> None:
        """Start loading the local embedding model in the background, while the rest of
        lamina is imported and the store opened: for a command that embeds at once. The
        model's imports go first: the rest of its load runs beside the other imports, which
        would otherwise share the GIL with the model's and delay it."""
        from lamina.embeddings import preload

        preload(self.settings().embedding, imports_first=True)

    def ms(self) -> Lamina:
        if self._ms is None:
            from lamina.facade import Lamina

            self._ms = Lamina(**self.options)
        return self._ms

    def close(self) -> None:
        if self._ms is not None:
            self._ms.close()


def emit(as_json: bool, value: Any, human: Callable[[], None]) -> None:
    """Print ``value`` as JSON with ``--json``; otherwise call ``human`` to print it."""
    if as_json:
        from lamina.shapes import jsonable

        click.echo(json.dumps(jsonable(value), ensure_ascii=False, indent=2))
    else:
        human()


def fail(error: LaminaError, as_json: bool) -> NoReturn:
    """Print an error (its object with ``--json``, else ``error: CODE: message`` on standard
    error) and exit with status 1."""
    if as_json:
        click.echo(json.dumps({"error": error.to_dict()}, ensure_ascii=False, indent=2))
    else:
        click.echo(f"error: {error.code.value}: {error.message}", err=True)
    sys.exit(1)


def confirm(question: str) -> None:
    """Ask ``question`` on standard error; unless the answer is yes, print that nothing was
    done and exit with status 1 (docs/cli.md). No answer at all (the end of the input) is a
    no; Ctrl-C is an interrupt (status 130)."""
    try:
        yes = click.confirm(question, err=True)
    except click.exceptions.Abort as exc:
        if not isinstance(exc.__context__, EOFError):
            raise
        yes = False
    if not yes:
        click.echo("aborted: nothing was done (--yes skips this question)", err=True)
        sys.exit(1)


def parse_json(raw: str | None, what: str, code: ErrorCode) -> Any:
    """The JSON of option ``--what``; ``code`` when it does not parse."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LaminaError(code, f"--{what} is not valid JSON: {exc.msg}") from None


def read_text(path: str | None, what: str) -> str | None:
    """The text of file ``path`` given to option ``--what`` ('-': standard input)."""
    if path is None:
        return None
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT, f"--{what}: cannot read {path}: {exc}"
        ) from None


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options as one decorator, in the order given (first shown first)."""

    def apply(fn: F) -> F:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def path_option(flag: str, dest: str, *, directory: bool, help: str) -> Callable[[F], F]:
    """An option naming a directory (``directory``) or a file, as a Path."""
    kind = click.Path(file_okay=not directory, dir_okay=directory, path_type=Path)
    return click.option(flag, dest, type=kind, default=None, help=help)


#: A tag of what is saved; ``any_tags_option``: the tags a list or search matches.
tag_option = click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
any_tags_option = click.option(
    "--tag", "tags", multiple=True, help="Any of these tags (repeatable)."
)
cursor_option = click.option("--cursor", default=None, help="next_cursor of the previous page.")


def identifier_options(fn: F) -> F:
    for name in reversed(IDENTIFIERS):
        flag = "--" + name.replace("_", "-")
        fn = click.option(flag, name, default=None, help=f"The {name.replace('_', ' ')}.")(fn)
    return fn


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def ids(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the identifier options out of a command's keyword arguments."""
    return {name: kwargs.pop(name) for name in IDENTIFIERS}


def window_options(fn: F) -> F:
    """--include-invalid, --since and --until of search and list (docs/memory.md, "Time")."""
    fn = click.option(
        "--until", default=None, help="Only events before this ISO-8601 time (exclusive)."
    )(fn)
    fn = click.option("--since", default=None, help="Only events at or after this ISO-8601 time.")(
        fn
    )
    return click.option(
        "--include-invalid", is_flag=True, help="Also facts no longer valid (invalidated)."
    )(fn)


def window(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the time-window options out of a command's keyword arguments."""
    return {name: kwargs.pop(name) for name in ("include_invalid", "since", "until")}
