"""``lamina memory ...``: scoped memories (mirrors ms.memory)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from lamina.cli._common import (
    State,
    any_tags_option,
    cursor_option,
    emit,
    identifier_options,
    ids,
    json_option,
    parse_json,
    read_text,
    tag_option,
    window,
    window_options,
)
from lamina.cli.memory.transfer import COMMANDS
from lamina.cli.output import cell, print_hits, print_page, progress
from lamina.errors import ErrorCode, LaminaError

if TYPE_CHECKING:  # `lamina memory search` starts loading the model before importing them
    from lamina.memory.models import FactOutcome, MemoryEntry, ScoreParts

__all__ = ["memory"]


@click.group("memory")
def memory() -> None:
    """Add, search, get, update, delete, list memories, read their history; delete, export
    and import them in bulk."""


def _show_entry(entry: MemoryEntry) -> None:
    names = ", ".join(f"{k}={v}" for k, v in entry.identifiers.items())
    click.echo(f"{entry.id}  [{entry.layer.value}: {names}]  {entry.updated_at:%Y-%m-%d %H:%M:%S}")
    click.echo(f"  {entry.content}")
    if entry.metadata:
        click.echo(f"  metadata: {json.dumps(entry.metadata, ensure_ascii=False)}")


#: The columns of a memory in search results (lists have no score).
_COLUMNS = ["score", "layer", "memory"]


def _cells(entry: MemoryEntry) -> list[Any]:
    names = ", ".join(f"{k}={v}" for k, v in entry.identifiers.items())
    metadata = json.dumps(entry.metadata, ensure_ascii=False) if entry.metadata else ""
    return [
        entry.layer.value,
        cell(
            entry.content,
            f"{entry.id}  {entry.updated_at:%Y-%m-%d %H:%M:%S}",
            names,
            f"metadata: {metadata}" if metadata else "",
        ),
    ]


@memory.command("add")
@click.argument("content")
@click.option("--layer", required=True, help="agent, user, session, project, team, org, company.")
@identifier_options
@tag_option
@click.option("--metadata", default=None, help="Metadata as a JSON object.")
@click.option("--actor", default=None, help="Who makes the change (recorded in history).")
@click.option("--timestamp", default=None, help="When the event happened (ISO-8601; default now).")
@click.option("--valid-from", default=None, help="The fact holds from this time (ISO-8601).")
@click.option("--valid-until", default=None, help="The fact holds until this time (ISO-8601).")
@click.option("--ttl", type=float, default=None, help="Seconds the memory lives (then expires).")
@click.option(
    "--dedup/--no-dedup",
    default=None,
    help="Return an exact duplicate instead of a new row (default: memory.dedup, on).",
)
@click.option("--infer", is_flag=True, help="Store CONTENT verbatim and consolidate its facts.")
@json_option
@click.pass_obj
def memory_add(state: State, /, content: str, layer: str, **kw: Any) -> None:
    """Store CONTENT as a memory in a layer. With --infer, the chat model (llm settings)
    extracts its facts and adds, updates or invalidates memories of the scope."""
    as_json, tags, actor = kw.pop("as_json"), kw.pop("tags"), kw.pop("actor")
    metadata = parse_json(kw.pop("metadata"), "metadata", ErrorCode.INVALID_ARGUMENT)
    if tags:
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "--metadata must be a JSON object")
        existing = metadata.get("tags") or []
        metadata["tags"] = [*existing, *tags] if isinstance(existing, list) else existing
    options = {n: kw.pop(n) for n in ("timestamp", "valid_from", "valid_until", "ttl", "dedup")}
    entry = state.ms().memory.add(
        content,
        layer=layer,
        metadata=metadata,
        actor=actor,
        infer=kw.pop("infer"),
        **options,
        **ids(kw),
    )

    def human() -> None:
        _show_entry(entry)
        if entry.deduplicated:
            click.echo("  (an exact duplicate was already stored: nothing new was written)")
        _show_facts(entry.facts)

    emit(as_json, entry, human)


def _show_facts(facts: list[FactOutcome] | None) -> None:
    """What consolidation did, one line per fact."""
    for fact in facts or []:
        where = f" -> {fact.memory.id}" if fact.memory is not None else ""
        gone = ", ".join(m.id for m in fact.invalidated)
        click.echo(f"  {fact.event.value.upper():6} {fact.fact}{where}")
        if fact.previous_content is not None:
            click.echo(f"         was: {fact.previous_content}")
        if gone:
            click.echo(f"         invalidated: {gone}")


def _read_messages(path: str) -> list[Any]:
    """The messages of a JSONL file ('-': standard input), one JSON object a line (blank
    lines skipped); a line that is no JSON is INVALID_ARGUMENT naming it."""
    text = read_text(path, "FILE") or ""
    messages: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"{path}: line {number} is not valid JSON: {exc.msg}",
                details={"line": number},
            ) from None
    return messages


@memory.command("add-messages")
@click.argument("file", metavar="FILE.jsonl")
@identifier_options
@click.option("--layer", default=None, help="Default: the most specific layer the ids reach.")
@click.option("--conversation-id", default=None, help="Continue this conversation (else new).")
@click.option("--metadata", default=None, help="Metadata (JSON object) for every message.")
@click.option("--actor", default=None, help="Who makes the change (recorded in history).")
@click.option("--ttl", type=float, default=None, help="Seconds the messages live.")
@click.option("--infer", is_flag=True, help="Also consolidate the facts the chat model finds.")
@json_option
@click.pass_obj
def memory_add_messages(state: State, /, file: str, **kw: Any) -> None:
    """Store a conversation: one memory per message of FILE.jsonl ('-': standard input), one
    {"role", "content", "name"?, "timestamp"?, "metadata"?} a line. All or none are stored.
    With --infer, the chat model (llm settings) also extracts facts and adds, updates or
    invalidates memories of the scope, in the same transaction."""
    as_json = kw.pop("as_json")
    metadata = parse_json(kw.pop("metadata"), "metadata", ErrorCode.INVALID_ARGUMENT)
    messages = _read_messages(file)
    with progress("embedding messages", as_json=as_json) as on_progress:
        added = state.ms().memory.add_messages(
            messages,
            layer=kw.pop("layer"),
            conversation_id=kw.pop("conversation_id"),
            metadata=metadata,
            actor=kw.pop("actor"),
            on_progress=on_progress,
            ttl=kw.pop("ttl"),
            infer=kw.pop("infer"),
            **ids(kw),
        )

    def human() -> None:
        positions = [m.metadata["conversation"]["position"] for m in added.memories]
        click.echo(
            f"stored {len(added.memories)} messages in layer {added.layer.value}, "
            f"conversation {added.conversation_id} (positions {positions[0]} to {positions[-1]})"
        )
        _show_facts(added.facts)

    emit(as_json, added, human)


@memory.command("embed-pending")
@json_option
@click.pass_obj
def memory_embed_pending(state: State, /, as_json: bool) -> None:
    """Embed the memories still waiting for an embedding (added with background embedding)."""
    with progress("embedding memories", as_json=as_json) as on_progress:
        count = state.ms().memory.embed_pending(on_progress=on_progress)
    emit(as_json, {"embedded": count}, lambda: click.echo(f"embedded {count} memories"))


@memory.command("reembed")
@click.option("--batch-size", type=int, default=256, show_default=True, help="Texts per batch.")
@json_option
@click.pass_obj
def memory_reembed(state: State, /, batch_size: int, as_json: bool) -> None:
    """Re-embed the whole store with the configured embedding model (after changing it);
    resumes an interrupted run, does nothing when the vectors are already of this model."""
    with progress("re-embedding", as_json=as_json) as on_progress:
        report = state.ms().memory.reembed(batch_size=batch_size, on_progress=on_progress)

    def human() -> None:
        if not report["reembedded"]:
            click.echo(f"nothing to do: the store's vectors are of {report['model']}")
            return
        click.echo(
            f"re-embedded {report['memories']} memories and {report['context_items']} context "
            f"items with {report['model']} ({report['dimensions']}-d; "
            f"was {report['from_model']}, {report['from_dimensions']}-d)"
        )

    emit(as_json, report, human)


@memory.command("search")
@click.argument("query")
@identifier_options
@click.option("--layer", "layers", multiple=True, help="Only this layer (repeatable).")
@click.option("--mode", default="hybrid", show_default=True, help="hybrid, semantic, keyword.")
@click.option(
    "--threshold", type=float, default=None, help="Minimum score in [0, 1] (default 0.7)."
)
@click.option("--explain", is_flag=True, help="Show each score's parts (docs/search.md).")
@click.option(
    "--collapse/--no-collapse",
    default=True,
    show_default=True,
    help="Leave out near-duplicates of a result kept (memory.dedup_threshold).",
)
@click.option("--limit", type=int, default=None, help="Most results (default 10).")
@any_tags_option
@click.option("--filter", "filters", default=None, help='Metadata filter JSON: {"f": {"gte": 2}}.')
@window_options
@json_option
@click.pass_obj
def memory_search(state: State, /, query: str, **kw: Any) -> None:
    """Search memories of every reachable layer, most specific layer first.

    With --json: {"results": [hits, each with its score parts], "below_threshold": n}."""
    as_json = kw.pop("as_json")
    explain = kw.pop("explain")
    filters = parse_json(kw.pop("filters"), "filter", ErrorCode.INVALID_FILTER)
    if kw["mode"] != "keyword":  # the query is embedded: load the model meanwhile
        state.preload_embedder()
    hits = state.ms().memory.search(
        query,
        layers=list(kw.pop("layers")) or None,
        tags=list(kw.pop("tags")) or None,
        filters=filters,
        mode=kw.pop("mode"),
        threshold=kw.pop("threshold"),
        limit=kw.pop("limit"),
        collapse=kw.pop("collapse"),
        **window(kw),
        **ids(kw),
    )

    nothing = "no memories found"
    if hits.below_threshold:
        many = "candidates" if hits.below_threshold > 1 else "candidate"
        nothing += (
            f" ({hits.below_threshold} {many} scored below the threshold; "
            "a lower --threshold shows them)"
        )
    columns = list(_COLUMNS)
    rows = [[f"{hit.score:.3f}", *_cells(hit.memory)] for hit in hits]
    if explain:
        columns = [*_COLUMNS[:1], "parts", *_COLUMNS[1:]]
        rows = [[row[0], _parts(hit.parts), *row[1:]] for row, hit in zip(rows, hits, strict=True)]
    emit(
        as_json,
        {"results": list(hits), "below_threshold": hits.below_threshold},
        lambda: print_hits(columns, rows, nothing=nothing),
    )


def _parts(parts: ScoreParts) -> str:
    """A score's parts, briefly: "sem 0.82 kw 0.40 speaker 0.40"."""
    shown = []
    if parts.semantic is not None:
        shown.append(f"sem {parts.semantic:.2f}")
    if parts.keyword is not None:
        shown.append(f"kw {parts.keyword:.2f}")
    for name in ("speaker", "conversation", "phrase", "date", "stale", "question"):
        value = getattr(parts, name)
        if value:
            shown.append(f"{name} {value:.2f}")
    return " ".join(shown)


@memory.command("get")
@click.argument("memory_id")
@json_option
@click.pass_obj
def memory_get(state: State, memory_id: str, as_json: bool) -> None:
    """Show one memory (exit status 1 when there is none)."""
    entry = state.ms().memory.get(memory_id)
    if entry is None:
        raise LaminaError(
            ErrorCode.MEMORY_NOT_FOUND, f"memory {memory_id!r} not found", details={"id": memory_id}
        )
    emit(as_json, entry, lambda: _show_entry(entry))


@memory.command("update")
@click.argument("memory_id")
@click.option("--content", default=None, help="New content (re-embedded).")
@click.option("--metadata", default=None, help="JSON object merged into the metadata.")
@click.option("--actor", default=None)
@json_option
@click.pass_obj
def memory_update(
    state: State,
    memory_id: str,
    content: str | None,
    metadata: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Change a memory's content and/or merge metadata into it."""
    patch = parse_json(metadata, "metadata", ErrorCode.INVALID_ARGUMENT)
    entry = state.ms().memory.update(memory_id, content=content, metadata=patch, actor=actor)
    emit(as_json, entry, lambda: _show_entry(entry))


@memory.command("delete")
@click.argument("memory_id")
@click.option("--actor", default=None)
@json_option
@click.pass_obj
def memory_delete(state: State, memory_id: str, actor: str | None, as_json: bool) -> None:
    """Delete a memory (succeeds when it is already gone)."""
    result = state.ms().memory.delete(memory_id, actor=actor)
    emit(
        as_json,
        result,
        lambda: click.echo(f"deleted {memory_id}" if result.existed else f"{memory_id} was absent"),
    )


@memory.command("list")
@identifier_options
@click.option("--layer", "layers", multiple=True, help="Only this layer (repeatable).")
@any_tags_option
@click.option("--filter", "filters", default=None, help="Metadata filter JSON.")
@click.option("--limit", type=int, default=None, help="Page size (default 50).")
@cursor_option
@window_options
@json_option
@click.pass_obj
def memory_list(state: State, /, **kw: Any) -> None:
    """List memories newest first, one page at a time."""
    as_json = kw.pop("as_json")
    filters = parse_json(kw.pop("filters"), "filter", ErrorCode.INVALID_FILTER)
    page = state.ms().memory.list(
        layers=list(kw.pop("layers")) or None,
        tags=list(kw.pop("tags")) or None,
        filters=filters,
        limit=kw.pop("limit"),
        cursor=kw.pop("cursor"),
        **window(kw),
        **ids(kw),
    )

    rows = [_cells(entry) for entry in page.items]
    emit(as_json, page, lambda: print_page(_COLUMNS[1:], rows, page))


@memory.command("invalidate")
@click.argument("memory_ids", nargs=-1, required=True, metavar="MEMORY_ID...")
@click.option("--at", default=None, help="When the facts stopped holding (ISO-8601; default now).")
@click.option("--actor", default=None)
@json_option
@click.pass_obj
def memory_invalidate(
    state: State, memory_ids: tuple[str, ...], at: str | None, actor: str | None, as_json: bool
) -> None:
    """Mark facts as no longer holding (kept; search and list show them with
    --include-invalid). All or none: an unknown id changes nothing."""
    entries = state.ms().memory.invalidate(list(memory_ids), at=at, actor=actor)

    def human() -> None:
        for e in entries:
            click.echo(f"{e.id} valid until {e.valid_until:%Y-%m-%d %H:%M:%S}")

    emit(as_json, entries, human)


@memory.command("purge-expired")
@json_option
@click.pass_obj
def memory_purge_expired(state: State, as_json: bool) -> None:
    """Remove memories whose time to live is over, now (the expiry job does it every
    memory.expiry_interval seconds; expired memories are never returned either way)."""
    with progress("removing expired memories", as_json=as_json):
        removed = state.ms().memory.purge_expired()
    emit(as_json, {"removed": removed}, lambda: click.echo(f"removed {removed} expired memories"))


@memory.command("history")
@click.argument("memory_id")
@json_option
@click.pass_obj
def memory_history(state: State, memory_id: str, as_json: bool) -> None:
    """Every add, update, invalidate and delete of a memory, oldest first (once it is
    deleted, its events keep who and when, never its content or metadata)."""
    events = state.ms().memory.history(memory_id)

    def human() -> None:
        for e in events:
            who = f" by {e.actor}" if e.actor else ""
            click.echo(f"{e.at:%Y-%m-%d %H:%M:%S.%f}  {e.operation.value}{who}")
            if e.old_content != e.new_content:
                if e.old_content is not None:
                    click.echo(f"  - {e.old_content}")
                if e.new_content is not None:
                    click.echo(f"  + {e.new_content}")
            if e.old_metadata != e.new_metadata and e.new_metadata is not None:
                click.echo(f"  metadata: {json.dumps(e.new_metadata, ensure_ascii=False)}")
        if events and events[-1].operation.value == "delete":
            click.echo("  (deleted: its content and metadata are forgotten)")

    emit(as_json, events, human)


for _command in COMMANDS:
    memory.add_command(_command)
