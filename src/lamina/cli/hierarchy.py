"""``lamina hierarchy ...``: which team a project, which org a team, which company an org
belongs to (mirrors the hierarchy calls of ms.memory)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from lamina.cli._common import State, emit, identifier_options, json_option, options
from lamina.memory.models import HierarchyLink

__all__ = ["hierarchy"]

Decorator = Callable[[Any], Any]


@click.group("hierarchy")
def hierarchy() -> None:
    """Register which team a project, which org a team, which company an org belongs to."""


def _show_links(links: list[HierarchyLink]) -> None:
    for link in links:
        click.echo(f"{link.level} {link.child_id} -> {link.parent_id}")


def _links_command(name: str, call: str, help: str, *levels: Decorator) -> None:
    """A command registering links through ``ms.memory.<call>``; prints the links."""

    @hierarchy.command(name, help=help)
    @options(*levels)
    @json_option
    @click.pass_obj
    def command(state: State, /, as_json: bool, **given: str | None) -> None:
        links = getattr(state.ms().memory, call)(**given)
        emit(as_json, links, lambda: _show_links(links))


_links_command(
    "register",
    "register_hierarchy",
    "Register adjacent links: project → team, team → org, org → company.",
    *(
        click.option(f"--{level}-id", default=None)
        for level in ("project", "team", "org", "company")
    ),
)
_links_command(
    "defaults",
    "set_hierarchy_defaults",
    "Set the tenant-wide parents (without them, parents default to 'default').",
    click.option("--team-id", default=None, help="Team of projects that registered none."),
    click.option("--org-id", default=None, help="Org of teams that registered none."),
    click.option("--company-id", default=None, help="Company of orgs that registered none."),
)


@hierarchy.command("resolve")
@identifier_options
@json_option
@click.pass_obj
def hierarchy_resolve(state: State, /, as_json: bool, **given: str | None) -> None:
    """Show the identifiers after resolution and the layers they reach."""
    result = state.ms().memory.resolve_identifiers(**given)

    def human() -> None:
        for name, value in result["identifiers"].items():
            click.echo(f"{name}: {value}")
        click.echo(f"layers: {', '.join(result['layers'])}")

    emit(as_json, result, human)
