"""Human output through rich: tables for lists and search results, progress bars on standard
error for long commands. ``--json`` output never comes here (see ``_common.emit``). rich is
imported when something is drawn: a command module importing this one stays light."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import click

from lamina.errors import ErrorCode, LaminaError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

__all__ = [
    "PROGRESS_MODES",
    "OnProgress",
    "Page",
    "cell",
    "print_fields",
    "print_hits",
    "print_page",
    "print_table",
    "progress",
]

#: What a long library call reports: (done, total), total None while it is not known.
OnProgress = Callable[[int, int | None], None]
#: ``LAMINA_PROGRESS``: auto (bars when standard error is a terminal), always, never.
PROGRESS_MODES = ("auto", "always", "never")


def _console(*, stderr: bool = False, force_terminal: bool | None = None) -> Console:
    from rich.console import Console

    # Content prints as given: no markup ("[user: …]" stays), no emoji codes, no highlighting.
    return Console(
        stderr=stderr,
        force_terminal=force_terminal,
        markup=False,
        emoji=False,
        highlight=False,
    )


def cell(first: str, *more: str) -> Text:
    """A cell: ``first`` as it is, then the non-empty ``more`` lines dimmed below it."""
    from rich.text import Text

    text = Text(first)
    rest = [line for line in more if line]
    if rest:
        text.append("\n" + "\n".join(rest), style="dim")
    return text


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[RenderableType]],
    *,
    numeric: Sequence[str] = (),
    no_wrap: Sequence[str] = (),
) -> None:
    """Print rows under their column titles; ``numeric`` columns align right, ``no_wrap``
    columns are never broken (identifiers to copy). Rows of several lines stand apart."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        show_lines=any(isinstance(c, Text) and "\n" in c.plain for row in rows for c in row),
    )
    for name in columns:
        table.add_column(
            name,
            justify="right" if name in numeric else "left",
            no_wrap=name in no_wrap,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*row)
    _console().print(table)


def print_fields(rows: Sequence[tuple[str, str]]) -> None:
    """Print label / value pairs, one a line, the values aligned; a long value (a path) runs
    on rather than being broken."""
    from rich.text import Text

    console = _console()
    width = max((len(label) for label, _ in rows), default=0) + 2
    for label, value in rows:
        console.print(Text(label.ljust(width), style="bold") + Text(value), soft_wrap=True)


def _progress_mode() -> str:
    mode = os.environ.get("LAMINA_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in PROGRESS_MODES:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"LAMINA_PROGRESS must be one of {', '.join(PROGRESS_MODES)}, not {mode!r}",
            details={"value": mode},
        )
    return mode


@contextmanager
def progress(description: str, *, as_json: bool) -> Iterator[OnProgress | None]:
    """A progress bar on standard error while the block runs; yields the callback to hand
    to the library call, or None when no bar is drawn: with ``--json``, with
    LAMINA_PROGRESS=never, or (auto, the default) when standard error is no terminal."""
    mode = _progress_mode()
    if as_json or mode == "never" or (mode == "auto" and not sys.stderr.isatty()):
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(stderr=True, force_terminal=True if mode == "always" else None),
        redirect_stdout=False,
        redirect_stderr=False,
    )
    task = bar.add_task(description, total=None)

    def update(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update


class Page(Protocol):
    """A page of a list call: its items, how many there are in all, the next page's cursor."""

    @property
    def items(self) -> Sequence[Any]: ...

    @property
    def total_count(self) -> int: ...

    @property
    def next_cursor(self) -> str | None: ...


def print_page(
    columns: Sequence[str], rows: Sequence[Sequence[RenderableType]], page: Page
) -> None:
    """A page of a list: its rows, then how many of how many and the next page's cursor
    (plain lines, never wrapped, to copy)."""
    if rows:
        print_table(columns, rows, no_wrap=columns[:1])
    click.echo(f"-- {len(page.items)} of {page.total_count}")
    if page.next_cursor:
        click.echo(f"-- next page: --cursor {page.next_cursor}")


def print_hits(
    columns: Sequence[str],
    rows: Sequence[Sequence[RenderableType]],
    *,
    nothing: str = "nothing found",
) -> None:
    """Search results, best first (the first column is the score); ``nothing`` when none."""
    if not rows:
        click.echo(nothing)
        return
    print_table(columns, rows, numeric=columns[:1], no_wrap=columns[1:2])
