"""``lamina context ...``: the context layers from the command line (mirrors ms.context).

The four stored layers have commands of one shape (save, search, list, get, delete): the
table ``LAYERS`` says how each layer differs and ``_layer_group`` makes its commands."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from lamina.cli._common import (
    State,
    any_tags_option,
    cursor_option,
    emit,
    json_option,
    options,
    parse_json,
    tag_option,
)
from lamina.cli.output import cell, print_hits, print_page
from lamina.errors import ErrorCode

__all__ = ["LAYERS", "Layer", "context"]

Decorator = Callable[[Any], Any]


@click.group("context")
def context() -> None:
    """User knowledge, agent learnings, skills, references; retrieve and assemble prompts."""


@dataclass(frozen=True)
class Layer:
    """A stored context layer as the CLI shows it."""

    command: str  # the group: lamina context <command> …
    attr: str  # the store, ms.context.<attr>: named after its items, as help texts say
    noun: str  # one item, in help texts
    help: str
    #: The search and list filter (--category or --type): its option, and the keyword
    #: argument of the store's search and list that gets its value.
    filter_option: tuple[str, str]
    filter_arg: str
    #: save: its help, arguments and options, and the store call it makes.
    save_help: str
    save_arguments: tuple[str, ...]
    save_options: tuple[Decorator, ...]
    #: The store's save call: the options passed by position, then those passed by keyword
    #: (``keyword=option`` where the names differ). Tags go as a list, ``_JSON`` options as
    #: the JSON objects they hold.
    save_call: tuple[tuple[str, ...], tuple[str, ...]]
    latest: bool = False  # versioned: search and list see the latest versions


#: The save options holding a JSON object.
_JSON = ("parameters", "metadata")


def _value(kw: dict[str, Any], name: str) -> Any:
    """A save option's value as the store takes it."""
    if name in _JSON:
        return parse_json(kw[name], name, ErrorCode.INVALID_ARGUMENT)
    return list(kw[name]) if name == "tags" else kw[name]


def _save(layer: Layer, store: Any, kw: dict[str, Any]) -> Any:
    """The layer's store call of ``save`` with the command's options ``kw``."""
    positional, keywords = layer.save_call
    named = dict(k.partition("=")[::2] for k in keywords)
    return store.save(
        *(_value(kw, name) for name in positional),
        **{key: _value(kw, name or key) for key, name in named.items()},
    )


def _type_option(dest: str, default: str, help: str) -> Decorator:
    """``--type`` of a layer whose items have one (its store keyword ``dest``)."""
    return click.option("--type", dest, default=default, show_default=True, help=help)


LAYERS = (
    Layer(
        command="knowledge",
        attr="knowledge",
        noun="knowledge item",
        help="What the user taught the agent (saving a key again adds a version).",
        filter_option=("--category", "category"),
        filter_arg="category",
        save_help="Save knowledge under KEY (a new version if KEY exists).",
        save_arguments=("key", "content"),
        save_options=(
            click.option(
                "--category",
                default="fact",
                show_default=True,
                help="rule, definition, preference, fact, pattern or correction.",
            ),
            tag_option,
            click.option("--source", default="", help="Where it came from."),
            click.option(
                "--relevance", type=float, default=None, help="Weight in retrieval, 0..1."
            ),
        ),
        save_call=(("key", "content"), ("category", "tags", "source", "relevance_score=relevance")),
        latest=True,
    ),
    Layer(
        command="learning",
        attr="learnings",
        noun="learning",
        help="What the agent learned from errors: trigger, diagnosis, fix.",
        filter_option=("--category", "category"),
        filter_arg="category",
        save_help="Record a learning (a known TRIGGER counts another occurrence).",
        save_arguments=("trigger",),
        save_options=(
            click.option("--fix", default="", help="What resolved it."),
            click.option("--error-pattern", default="", help="The error text or pattern."),
            click.option("--diagnosis", default="", help="Why it happened."),
            click.option(
                "--category",
                default=None,
                help="tool_error, provider_error, user_correction, timeout, permission, general.",
            ),
            tag_option,
        ),
        save_call=(("trigger", "fix"), ("error_pattern", "diagnosis", "category", "tags")),
    ),
    Layer(
        command="skill",
        attr="skills",
        noun="skill",
        help="Reusable procedures by name.",
        filter_option=("--type", "skill_type"),
        filter_arg="type",
        save_help="Save a skill (replaces one of the same NAME).",
        save_arguments=("name", "description"),
        save_options=(
            _type_option("skill_type", "composite", "composite, script or template."),
            click.option("--definition", default="", help="Steps, a script or a template."),
            click.option(
                "--parameters", default=None, help="JSON object describing the parameters."
            ),
            tag_option,
        ),
        save_call=(
            ("name", "description"),
            ("type=skill_type", "definition", "parameters", "tags"),
        ),
    ),
    Layer(
        command="ref",
        attr="references",
        noun="reference",
        help="External references: documents, URLs, repositories.",
        filter_option=("--type", "ref_type"),
        filter_arg="ref_type",
        save_help="Save a reference (replaces one of the same NAME).",
        save_arguments=("name", "location"),
        save_options=(
            _type_option("ref_type", "url", "url, document, repository, ..."),
            click.option("--summary", default="", help="What it holds."),
            click.option("--metadata", default=None, help="JSON object."),
            tag_option,
        ),
        save_call=(("name", "location"), ("ref_type", "summary", "metadata", "tags")),
    ),
)


def _fields(item: Any) -> tuple[str, list[tuple[str, Any]]]:
    """An item's head (its key, name or trigger) and its other non-empty fields."""
    data = item.model_dump(mode="json")
    head = data.get("key") or data.get("name") or data.get("trigger")
    skip = ("id", "version", "is_latest", "key", "name", "created_at")
    fields = [(k, v) for k, v in data.items() if k not in skip and v not in ("", [], {})]
    return str(head), fields


def _show(item: Any) -> None:
    head, fields = _fields(item)
    click.echo(f"{head}  (v{item.version}, id {item.id})")
    for name, value in fields:
        click.echo(f"  {name}: {value}")


#: The columns of an item in lists and search results.
_COLUMNS = ["key", "version", "item"]
#: What an item is about, shown first in its cell: the first of these it has.
_MAIN = ("content", "description", "fix", "location")


def _row(item: Any) -> list[Any]:
    head, fields = _fields(item)
    main = next((f for f in fields if f[0] in _MAIN), None)
    rest = [f"{k}: {v}" for k, v in fields if (k, v) != main and k != "trigger"]  # the head
    first = f"{main[0]}: {main[1]}" if main else ""
    return [head, str(item.version), cell(first, *rest, f"id {item.id}")]


def _layer_group(layer: Layer) -> click.Group:
    """The layer's group: save, search, list, get and delete."""
    group = click.Group(layer.command, help=layer.help)
    for add in (_add_save, _add_search, _add_list, _add_get, _add_delete):
        add(group, layer)
    context.add_command(group)
    return group


def _latest(layer: Layer) -> str:
    return " (latest versions)" if layer.latest else ""


def _add_save(group: click.Group, layer: Layer) -> None:
    @group.command("save", help=layer.save_help)
    @options(*(click.argument(name) for name in layer.save_arguments), *layer.save_options)
    @json_option
    @click.pass_obj
    def save(state: State, /, **kw: Any) -> None:
        item = _save(layer, getattr(state.ms().context, layer.attr), kw)
        emit(kw["as_json"], item, lambda: _show(item))


def _add_search(group: click.Group, layer: Layer) -> None:
    dest = layer.filter_option[1]

    @group.command("search", help=f"Search {layer.attr}{_latest(layer)}.")
    @click.argument("query")
    @options(
        click.option(*layer.filter_option, default=None),
        click.option("--limit", type=int, default=None, help="Most results (default 5)."),
        any_tags_option,
        click.option("--mode", default=None, help="hybrid, semantic or keyword."),
    )
    @json_option
    @click.pass_obj
    def search(state: State, /, query: str, **kw: Any) -> None:
        hits = getattr(state.ms().context, layer.attr).search(
            query,
            limit=kw["limit"],
            tags=list(kw["tags"]),
            mode=kw["mode"],
            **{layer.filter_arg: kw[dest]},
        )
        rows = [[f"{hit.score:.3f}", *_row(hit.item)] for hit in hits]
        emit(kw["as_json"], hits, lambda: print_hits(["score", *_COLUMNS], rows))


def _add_list(group: click.Group, layer: Layer) -> None:
    dest = layer.filter_option[1]

    @group.command("list", help=f"List {layer.attr}{_latest(layer)}, oldest first.")
    @options(
        click.option(*layer.filter_option, default=None),
        click.option("--limit", type=int, default=None, help="Page size (default 50)."),
        any_tags_option,
        cursor_option,
    )
    @json_option
    @click.pass_obj
    def list_(state: State, /, **kw: Any) -> None:
        page = getattr(state.ms().context, layer.attr).list(
            tags=list(kw["tags"]),
            limit=kw["limit"],
            cursor=kw["cursor"],
            **{layer.filter_arg: kw[dest]},
        )
        rows = [_row(item) for item in page.items]
        emit(kw["as_json"], page, lambda: print_page(_COLUMNS, rows, page))


def _add_get(group: click.Group, layer: Layer) -> None:
    @group.command(
        "get", help=f"Show one {layer.noun} by key (or id); exit status 1 if there is none."
    )
    @click.argument("key")
    @click.option("--versions", is_flag=True, help="Every version, newest first.")
    @json_option
    @click.pass_obj
    def get(state: State, key: str, versions: bool, as_json: bool) -> None:
        store = getattr(state.ms().context, layer.attr)
        if versions:
            if not hasattr(store, "versions"):
                raise click.UsageError(f"{layer.noun} items have one version at a time")
            items = store.versions(key)

            def human() -> None:
                for i in items:
                    _show(i)

            emit(as_json, items, human)
        else:
            item = store.get(key)
            emit(as_json, item, lambda: _show(item))


def _add_delete(group: click.Group, layer: Layer) -> None:
    @group.command("delete", help=f"Delete a {layer.noun} (every version).")
    @click.argument("key")
    @json_option
    @click.pass_obj
    def delete(state: State, key: str, as_json: bool) -> None:
        count = getattr(state.ms().context, layer.attr).delete(key)
        result = {"deleted": count, "key": key}
        emit(as_json, result, lambda: click.echo(f"deleted {key} ({count} version(s))"))


groups = {layer.command: _layer_group(layer) for layer in LAYERS}


@groups["learning"].command("outcome")
@click.argument("trigger")
@click.option("--success/--failure", required=True, help="Whether the fix worked this time.")
@json_option
@click.pass_obj
def learning_outcome(state: State, /, trigger: str, success: bool, as_json: bool) -> None:
    """Count one application of a learning's fix (updates its confidence)."""
    item = state.ms().context.learnings.record_outcome(trigger, success)
    emit(as_json, item, lambda: _show(item))


# -- retrieval --------------------------------------------------------------------------


@context.command("retrieve")
@click.argument("query")
@click.option(
    "--layer",
    "layers",
    multiple=True,
    help="A context layer (repeatable; default: the four searchable ones).",
)
@click.option("--max-per-layer", type=int, default=None, help="Items per layer (default 5).")
@click.option("--session", "session_key", default=None, help="Session key.")
@json_option
@click.pass_obj
def context_retrieve(state: State, /, query: str, **kw: Any) -> None:
    """Retrieve context for QUERY from the context layers."""
    result = state.ms().context.retrieve(
        query,
        layers=list(kw["layers"]) or None,
        max_per_layer=kw["max_per_layer"],
        session_key=kw["session_key"],
    )

    def human() -> None:
        if not result.keywords:
            click.echo("no keywords in the query: nothing retrieved")
        for layer, items in result.items.items():
            click.echo(f"{layer.value}: {len(items)}")
            for item in items:
                click.echo(f"  {item.score:.3f}  {item.key}: {item.content}")

    emit(kw["as_json"], result, human)


@context.command("prompt")
@click.argument("query")
@click.option(
    "--base",
    default="",
    help="The base system prompt (default: the session's kept one, with --session).",
)
@click.option("--layer", "layers", multiple=True, help="A context layer (repeatable).")
@click.option("--session", "session_key", default=None, help="Session key.")
@click.option("--user-id", default=None, help="Add the user's relevant memories.")
@json_option
@click.pass_obj
def context_prompt(state: State, /, query: str, **kw: Any) -> None:
    """Print the system prompt assembled for QUERY."""
    ids = {"user_id": kw["user_id"]} if kw["user_id"] else None
    ms = state.ms()
    prompt = ms.context.build_prompt(
        ms.sessions.base_prompt(kw["session_key"], kw["base"]),
        query,
        layers=list(kw["layers"]) or None,
        session_key=kw["session_key"],
        identifiers=ids,
    )
    emit(kw["as_json"], {"prompt": prompt}, lambda: click.echo(prompt))
