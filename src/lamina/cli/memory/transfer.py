"""``lamina memory delete-all | export | import``: memories in bulk (mirrors
ms.memory.delete_all, export and import_)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from lamina.cli._common import State, confirm, emit, identifier_options, ids, json_option
from lamina.cli.output import progress
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.formats import FORMATS

__all__ = ["COMMANDS"]

_LAYERS = click.option(
    "--layer", "layers", multiple=True, help="Only this layer (repeatable; default: every one)."
)


def _scope(given: dict[str, Any], layers: tuple[str, ...]) -> str:
    names = ", ".join(f"{k}={v}" for k, v in given.items() if v is not None) or "every memory"
    return names + (f" (layers: {', '.join(layers)})" if layers else "")


@click.command("delete-all")
@identifier_options
@_LAYERS
@click.option("--actor", default=None, help="Who deletes (recorded in history).")
@click.option(
    "--include-sessions",
    is_flag=True,
    help="Also delete the session messages, observations and reflections of --session-id "
    "and of the sessions the deleted memories name (ms.memory.forget).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_obj
def memory_delete_all(state: State, /, **kw: Any) -> None:
    """Delete every memory whose identifiers include all those given (--user-id alice:
    alice's user, agent and session memories), forgotten as `memory delete` forgets one.
    At least one identifier is required. With --include-sessions, their sessions'
    observational memory goes too, and the counts are per kind."""
    as_json, layers, actor = kw.pop("as_json"), kw.pop("layers"), kw.pop("actor")
    sessions = kw.pop("include_sessions")
    given = ids(kw)
    if not kw.pop("yes") and any(v is not None for v in given.values()):
        what = "memory and session" if sessions else "memory"
        confirm(f"Delete every {what} of {_scope(given, layers)}?")
    chosen = list(layers) or None
    if not sessions:
        with progress("deleting memories", as_json=as_json):
            count = state.ms().memory.delete_all(layers=chosen, actor=actor, **given)
        emit(as_json, {"deleted": count}, lambda: click.echo(f"deleted {count} memories"))
        return
    with progress("deleting memories and sessions", as_json=as_json):
        done = state.ms().memory.forget(layers=chosen, actor=actor, **given)
    emit(
        as_json,
        {"deleted": done.memories, **done.model_dump(exclude={"memories"})},
        lambda: click.echo(
            f"deleted {done.memories} memories; of {len(done.sessions)} session(s): "
            f"{done.session_messages} messages, {done.observations} observations, "
            f"{done.reflections} reflections, {done.graph_relations} graph relations"
        ),
    )


@click.command("export")
@identifier_options
@_LAYERS
@click.option("--embeddings", is_flag=True, help="Include each memory's vector (base64).")
@click.option("--history", is_flag=True, help="Include each memory's history.")
@click.option(
    "--output",
    "-o",
    default=None,
    help="Write to this file (replaced once complete); default: standard output.",
)
@json_option
@click.pass_obj
def memory_export(state: State, /, **kw: Any) -> None:
    """Export memories as JSON Lines, one memory a line, oldest first (docs/export.md):
    every memory of the tenant, or those whose identifiers include all those given.
    With --output, then prints how many (--json: as JSON)."""
    as_json, output = kw.pop("as_json"), kw.pop("output")
    call = {
        "layers": list(kw.pop("layers")) or None,
        "embeddings": kw.pop("embeddings"),
        "history": kw.pop("history"),
        **ids(kw),
    }
    from lamina.memory.records import dump_record  # heavy (numpy, pydantic): when used

    ms = state.ms()
    if output is None:
        for record in ms.memory.export(**call):
            sys.stdout.write(dump_record(record) + "\n")
        return
    target = Path(output)
    partial = target.with_name(f".{target.name}.partial")
    done = 0
    try:
        with (
            progress("exporting memories", as_json=as_json) as on_progress,
            partial.open("w", encoding="utf-8") as handle,
        ):
            for record in ms.memory.export(**call):
                handle.write(dump_record(record) + "\n")
                done += 1
                if on_progress is not None and done % 1000 == 0:
                    on_progress(done, None)
        os.replace(partial, target)
    except OSError as exc:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT, f"--output: cannot write {output}: {exc}"
        ) from None
    finally:
        partial.unlink(missing_ok=True)
    emit(
        as_json,
        {"exported": done, "file": str(target)},
        lambda: click.echo(f"exported {done} memories to {target}"),
    )


@click.command("import")
@click.argument("file", metavar="FILE.jsonl")
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="lamina",
    show_default=True,
    help="lamina: `memory export` records; mem0: mem0's memories (docs/export.md).",
)
@click.option("--actor", default=None, help="Who imports (recorded in history).")
@click.option("--batch-size", type=int, default=1000, show_default=True, help="Per transaction.")
@json_option
@click.pass_obj
def memory_import(state: State, /, file: str, **kw: Any) -> None:
    """Import memories from FILE.jsonl ('-': standard input), keeping their ids: importing
    a file again adds nothing. Every line is checked first: a bad one stops the import
    before anything is stored, naming its line."""
    as_json = kw.pop("as_json")
    source: Any = sys.stdin.readlines() if file == "-" else Path(file)
    with progress("importing memories", as_json=as_json) as on_progress:
        report = state.ms().memory.import_(
            source,
            format=kw.pop("format_"),
            actor=kw.pop("actor"),
            batch_size=kw.pop("batch_size"),
            on_progress=on_progress,
        )
    emit(
        as_json,
        report,
        lambda: click.echo(
            f"imported {report.imported} of {report.records} memories "
            f"({report.skipped} already present, {report.embedded} embedded)"
        ),
    )


COMMANDS = [memory_delete_all, memory_export, memory_import]
