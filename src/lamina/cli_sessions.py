"""``lamina session ...``: session messages and observational memory (mirrors ms.sessions)."""

from __future__ import annotations

from typing import Any

import click

from lamina.cli import _Context, _emit, _parse_json, cli, json_option
from lamina.errors import ErrorCode


@cli.group()
def session() -> None:
    """Session messages, observations and reflections (observational memory)."""


def _show_notes(notes: list[Any], what: str) -> None:
    if not notes:
        click.echo(f"no {what}")
    for n in notes:
        gen = f"gen {n.generation}, " if n.generation else ""
        click.echo(
            f"- ({gen}messages {n.source_start}-{n.source_end}, {n.token_count} tokens) {n.content}"
        )


@session.command("append")
@click.argument("session_key")
@click.argument("role", type=click.Choice(["system", "user", "assistant", "tool"]))
@click.argument("content")
@click.option("--tool-calls", default=None, help='JSON list: [{"name", "input", "output"}].')
@json_option
@click.pass_obj
def session_append(
    state: _Context, /, session_key: str, role: str, content: str, **kw: Any
) -> None:
    """Append a message to a session."""
    calls = _parse_json(kw["tool_calls"], "tool-calls", ErrorCode.INVALID_ARGUMENT)
    message = state.ms().sessions.append(session_key, role, content, tool_calls=calls)
    _emit(
        kw["as_json"],
        message,
        lambda: click.echo(f"#{message.index} [{message.role}] ({message.token_count} tokens)"),
    )


@session.command("show")
@click.argument("session_key")
@json_option
@click.pass_obj
def session_show(state: _Context, /, session_key: str, as_json: bool) -> None:
    """Messages, observations and reflections of a session."""
    view = state.ms().sessions.show(session_key)

    def human() -> None:
        for m in view.messages:
            mark = " " if m.index > view.observed_through else "*"
            click.echo(f"{mark}#{m.index} [{m.role}] {m.content}")
            for call in m.tool_calls:
                click.echo(f"    [tool:{call['name']}] {call.get('input')}")
        click.echo(f"(* observed; {view.unobserved_tokens} un-observed tokens)")
        click.echo("reflections:")
        _show_notes(view.reflections, "reflections")
        click.echo("observations:")
        _show_notes(view.observations, "observations")

    _emit(as_json, view, human)


@session.command("list")
@json_option
@click.pass_obj
def session_list(state: _Context, /, as_json: bool) -> None:
    """Every session of the tenant, with its message count."""
    sessions = state.ms().sessions.list_sessions()
    rows = [{"session_key": k, "messages": n} for k, n in sessions]

    def human() -> None:
        for k, n in sessions:
            click.echo(f"{k}  {n} message(s)")

    _emit(as_json, rows, human)


@session.command("observe")
@click.argument("session_key")
@json_option
@click.pass_obj
def session_observe(state: _Context, /, session_key: str, as_json: bool) -> None:
    """Run the Observer on the un-observed messages now."""
    note = state.ms().sessions.observe(session_key)
    _emit(
        as_json,
        {"observation": note},
        lambda: _show_notes([note] if note else [], "un-observed messages"),
    )


@session.command("reflect")
@click.argument("session_key")
@json_option
@click.pass_obj
def session_reflect(state: _Context, /, session_key: str, as_json: bool) -> None:
    """Run the Reflector on the session's observations now."""
    note = state.ms().sessions.reflect(session_key)
    _emit(
        as_json,
        {"reflection": note},
        lambda: _show_notes([note] if note else [], "observations to reflect on"),
    )


@session.command("observations")
@click.argument("session_key")
@click.option("--limit", type=int, default=None, help="The most recent N.")
@json_option
@click.pass_obj
def session_observations(
    state: _Context, /, session_key: str, limit: int | None, as_json: bool
) -> None:
    """List observations, oldest first."""
    notes = state.ms().sessions.observations(session_key, limit=limit)
    _emit(as_json, notes, lambda: _show_notes(notes, "observations"))


@session.command("reflections")
@click.argument("session_key")
@click.option("--limit", type=int, default=None, help="The most recent N.")
@json_option
@click.pass_obj
def session_reflections(
    state: _Context, /, session_key: str, limit: int | None, as_json: bool
) -> None:
    """List reflections, oldest first."""
    notes = state.ms().sessions.reflections(session_key, limit=limit)
    _emit(as_json, notes, lambda: _show_notes(notes, "reflections"))


@session.command("delete-observations")
@click.argument("session_key")
@json_option
@click.pass_obj
def session_delete_observations(state: _Context, /, session_key: str, as_json: bool) -> None:
    """Delete a session's observations (none: nothing happens)."""
    count = state.ms().sessions.delete_observations(session_key)
    _emit(as_json, {"deleted": count}, lambda: click.echo(f"deleted {count} observation(s)"))


@session.command("delete-reflections")
@click.argument("session_key")
@json_option
@click.pass_obj
def session_delete_reflections(state: _Context, /, session_key: str, as_json: bool) -> None:
    """Delete a session's reflections (none: nothing happens)."""
    count = state.ms().sessions.delete_reflections(session_key)
    _emit(as_json, {"deleted": count}, lambda: click.echo(f"deleted {count} reflection(s)"))


@session.command("compact")
@click.argument("session_key")
@click.argument("up_to_index", type=int)
@click.argument("summary")
@json_option
@click.pass_obj
def session_compact(
    state: _Context, /, session_key: str, up_to_index: int, summary: str, as_json: bool
) -> None:
    """Replace messages 0..UP_TO_INDEX by one "[Compacted Summary]" system message."""
    message = state.ms().sessions.compact(session_key, up_to_index, summary)
    _emit(as_json, message, lambda: click.echo(f"compacted into #{message.index}"))
