"""``lamina session ...``: session messages and observational memory (mirrors ms.sessions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from lamina.cli._common import State, emit, json_option, parse_json
from lamina.cli.output import print_table, progress
from lamina.errors import ErrorCode, LaminaError

__all__ = ["session"]


@click.group("session")
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
def session_append(state: State, /, session_key: str, role: str, content: str, **kw: Any) -> None:
    """Append a message to a session."""
    calls = parse_json(kw["tool_calls"], "tool-calls", ErrorCode.INVALID_ARGUMENT)
    message = state.ms().sessions.append(session_key, role, content, tool_calls=calls)
    emit(
        kw["as_json"],
        message,
        lambda: click.echo(f"#{message.index} [{message.role}] ({message.token_count} tokens)"),
    )


@session.command("show")
@click.argument("session_key")
@json_option
@click.pass_obj
def session_show(state: State, /, session_key: str, as_json: bool) -> None:
    """Messages, observations and reflections of a session."""
    view = state.ms().sessions.show(session_key)

    def human() -> None:
        if view.system_prompt is not None:
            click.echo(f"system prompt: {view.system_prompt}")
        for m in view.messages:
            mark = " " if m.index > view.observed_through else "*"
            click.echo(f"{mark}#{m.index} [{m.role}] {m.content}")
            for call in m.tool_calls:
                if not call.get("kept"):  # a framework adapter's copy (in --json)
                    click.echo(f"    [tool:{call['name']}] {call.get('input')}")
        click.echo(f"(* observed; {view.unobserved_tokens} un-observed tokens)")
        click.echo("reflections:")
        _show_notes(view.reflections, "reflections")
        click.echo("observations:")
        _show_notes(view.observations, "observations")

    emit(as_json, view, human)


@session.command("list")
@json_option
@click.pass_obj
def session_list(state: State, /, as_json: bool) -> None:
    """Every session of the tenant, with its message count."""
    sessions = state.ms().sessions.list_sessions()
    rows = [{"session_key": k, "messages": n} for k, n in sessions]

    def human() -> None:
        if not sessions:
            click.echo("no sessions")
            return
        print_table(
            ["session", "messages"], [[k, str(n)] for k, n in sessions], numeric=["messages"]
        )

    emit(as_json, rows, human)


@dataclass(frozen=True)
class _Notes:
    """A kind of session note: the command that makes one now, and those that list and
    delete a session's notes of the kind."""

    kind: str  # observation: the call, the JSON key, the list and delete commands
    run: str  # observe: the command and the call that makes one now
    run_help: str
    nothing: str  # what there was none of when no note was made


_NOTES = (
    _Notes(
        "observation",
        "observe",
        "Run the Observer on the un-observed messages now.",
        "un-observed messages",
    ),
    _Notes(
        "reflection",
        "reflect",
        "Run the Reflector on the session's observations now.",
        "observations to reflect on",
    ),
)


def _note_commands(notes: _Notes) -> None:
    plural = f"{notes.kind}s"

    @session.command(notes.run, help=notes.run_help)
    @click.argument("session_key")
    @json_option
    @click.pass_obj
    def make(state: State, /, session_key: str, as_json: bool) -> None:
        with progress(f"making the {notes.kind}", as_json=as_json):
            note = getattr(state.ms().sessions, notes.run)(session_key)
        found = [note] if note else []
        emit(as_json, {notes.kind: note}, lambda: _show_notes(found, notes.nothing))

    @session.command(plural, help=f"List {plural}, oldest first.")
    @click.argument("session_key")
    @click.option("--limit", type=int, default=None, help="The most recent N.")
    @json_option
    @click.pass_obj
    def listed(state: State, /, session_key: str, limit: int | None, as_json: bool) -> None:
        found = getattr(state.ms().sessions, plural)(session_key, limit=limit)
        emit(as_json, found, lambda: _show_notes(found, plural))

    @session.command(
        f"delete-{plural}", help=f"Delete a session's {plural} (none: nothing happens)."
    )
    @click.argument("session_key")
    @json_option
    @click.pass_obj
    def delete(state: State, /, session_key: str, as_json: bool) -> None:
        count = getattr(state.ms().sessions, f"delete_{plural}")(session_key)
        emit(as_json, {"deleted": count}, lambda: click.echo(f"deleted {count} {notes.kind}(s)"))


for _kind in _NOTES:
    _note_commands(_kind)


@session.command("delete-messages")
@click.argument("session_key")
@click.option("--start", type=int, default=0, show_default=True, help="The first index deleted.")
@json_option
@click.pass_obj
def session_delete_messages(state: State, /, session_key: str, start: int, as_json: bool) -> None:
    """Delete messages from index START on (from 0: observations and reflections too)."""
    count = state.ms().sessions.delete_messages(session_key, start=start)
    emit(as_json, {"deleted": count}, lambda: click.echo(f"deleted {count} message(s)"))


@session.command("system-prompt")
@click.argument("session_key")
@click.option("--set", "text", default=None, help="Replace it with TEXT.")
@click.option("--clear", is_flag=True, help="Clear it.")
@json_option
@click.pass_obj
def session_system_prompt(
    state: State, /, session_key: str, text: str | None, clear: bool, as_json: bool
) -> None:
    """The session's base system prompt (the one the context-aware model keeps); with --set
    or --clear, replace or clear it first."""
    if text is not None and clear:
        raise LaminaError(ErrorCode.INVALID_ARGUMENT, "give --set or --clear, not both")
    sessions = state.ms().sessions
    if text is not None or clear:
        sessions.set_system_prompt(session_key, None if clear else text)
    prompt = sessions.system_prompt(session_key)
    emit(
        as_json,
        {"session_key": session_key, "system_prompt": prompt},
        lambda: click.echo("no system prompt" if prompt is None else prompt),
    )


@session.command("meta-reflect")
@click.argument("session_key")
@json_option
@click.pass_obj
def session_meta_reflect(state: State, /, session_key: str, as_json: bool) -> None:
    """Consolidate the session's reflections into one of the next generation now."""
    with progress("consolidating reflections", as_json=as_json):
        note = state.ms().sessions.meta_reflect(session_key)
    found = [note] if note else []
    emit(as_json, {"reflection": note}, lambda: _show_notes(found, "reflections to consolidate"))


@session.command("compact")
@click.argument("session_key")
@click.argument("up_to_index", type=int)
@click.argument("summary")
@json_option
@click.pass_obj
def session_compact(
    state: State, /, session_key: str, up_to_index: int, summary: str, as_json: bool
) -> None:
    """Replace messages 0..UP_TO_INDEX by one "[Compacted Summary]" system message."""
    message = state.ms().sessions.compact(session_key, up_to_index, summary)
    emit(as_json, message, lambda: click.echo(f"compacted into #{message.index}"))
