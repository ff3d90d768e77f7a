"""A click group whose commands are imported when they run (click's LazyGroup pattern), so
``lamina --version`` and ``lamina --help`` import no command module, nor what the commands
need (stores, models, numpy, git…). ``--help`` lists every command with the short help kept
beside its import path; a test checks it against the command's own."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

import click

__all__ = ["LazyCommand", "LazyGroup"]


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives (``"package.module:attribute"``) and its short help, the first
    sentence of its docstring as ``lamina --help`` shows it."""

    path: str
    short_help: str

    def load(self) -> click.Command:
        module, _, attribute = self.path.partition(":")
        command = getattr(import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.path} is not a click command")
        return command


class LazyGroup(click.Group):
    """A group whose ``lazy`` commands are imported on first use and then kept."""

    def __init__(self, *args: Any, lazy: dict[str, LazyCommand] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, from the kept short help of a command not imported yet."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:  # a stand-in: click shortens its help as the command's own
                command = click.Command(name, help=self.lazy[name].short_help)
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
