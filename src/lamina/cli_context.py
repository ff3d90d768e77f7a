"""``lamina context ...``: the context layers from the command line (mirrors ms.context)."""

from __future__ import annotations

from typing import Any

import click

from lamina.cli import _Context, _emit, _parse_json, cli, json_option
from lamina.errors import ErrorCode


@cli.group()
def context() -> None:
    """User knowledge, agent learnings, skills, references; retrieve and assemble prompts."""


@context.group()
def knowledge() -> None:
    """What the user taught the agent (saving a key again adds a version)."""


@context.group()
def learning() -> None:
    """What the agent learned from errors: trigger, diagnosis, fix."""


@context.group()
def skill() -> None:
    """Reusable procedures by name."""


@context.group()
def ref() -> None:
    """External references: documents, URLs, repositories."""


def _show(item: Any) -> None:
    data = item.model_dump(mode="json")
    head = data.get("key") or data.get("name") or data.get("trigger")
    click.echo(f"{head}  (v{data['version']}, id {data['id']})")
    for name, value in data.items():
        if name in ("id", "version", "is_latest", "key", "name", "created_at") or value in (
            "",
            [],
            {},
        ):
            continue
        click.echo(f"  {name}: {value}")


def _show_hits(hits: list[Any]) -> None:
    if not hits:
        click.echo("nothing found")
    for hit in hits:
        click.echo(f"{hit.score:.3f}  ", nl=False)
        _show(hit.item)


def _show_page(page: Any) -> None:
    for item in page.items:
        _show(item)
    click.echo(f"{len(page.items)} of {page.total_count}")
    if page.next_cursor:
        click.echo(f"next page: --cursor {page.next_cursor}")


def _search_options(fn: Any) -> Any:
    fn = click.option("--mode", default=None, help="hybrid, semantic or keyword.")(fn)
    fn = click.option("--tag", "tags", multiple=True, help="Any of these tags (repeatable).")(fn)
    return click.option("--limit", type=int, default=None, help="Most results (default 5).")(fn)


def _list_options(fn: Any) -> Any:
    fn = click.option("--cursor", default=None, help="next_cursor of the previous page.")(fn)
    fn = click.option("--tag", "tags", multiple=True, help="Any of these tags (repeatable).")(fn)
    return click.option("--limit", type=int, default=None, help="Page size (default 50).")(fn)


def _common(layer: click.Group, attr: str, noun: str) -> None:
    """get and delete, the same for every layer."""

    @layer.command("get")
    @click.argument("key")
    @click.option("--versions", is_flag=True, help="Every version, newest first.")
    @json_option
    @click.pass_obj
    def get(state: _Context, key: str, versions: bool, as_json: bool) -> None:
        store = getattr(state.ms().context, attr)
        if versions:
            if not hasattr(store, "versions"):
                raise click.UsageError(f"{noun} items have one version at a time")
            items = store.versions(key)

            def human() -> None:
                for i in items:
                    _show(i)

            _emit(as_json, items, human)
        else:
            item = store.get(key)
            _emit(as_json, item, lambda: _show(item))

    get.__doc__ = f"Show one {noun} by key (or id); exit status 1 if there is none."

    @layer.command("delete")
    @click.argument("key")
    @json_option
    @click.pass_obj
    def delete(state: _Context, key: str, as_json: bool) -> None:
        count = getattr(state.ms().context, attr).delete(key)
        result = {"deleted": count, "key": key}
        _emit(as_json, result, lambda: click.echo(f"deleted {key} ({count} version(s))"))

    delete.__doc__ = f"Delete a {noun} (every version)."


# -- knowledge --------------------------------------------------------------------------


@knowledge.command("save")
@click.argument("key")
@click.argument("content")
@click.option(
    "--category",
    default="fact",
    show_default=True,
    help="rule, definition, preference, fact, pattern or correction.",
)
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--source", default="", help="Where it came from.")
@click.option("--relevance", type=float, default=None, help="Weight in retrieval, 0..1.")
@json_option
@click.pass_obj
def knowledge_save(state: _Context, /, key: str, content: str, **kw: Any) -> None:
    """Save knowledge under KEY (a new version if KEY exists)."""
    as_json = kw.pop("as_json")
    item = state.ms().context.knowledge.save(
        key,
        content,
        category=kw["category"],
        tags=list(kw["tags"]),
        source=kw["source"],
        relevance_score=kw["relevance"],
    )
    _emit(as_json, item, lambda: _show(item))


@knowledge.command("search")
@click.argument("query")
@click.option("--category", default=None)
@_search_options
@json_option
@click.pass_obj
def knowledge_search(state: _Context, /, query: str, **kw: Any) -> None:
    """Search knowledge (latest versions)."""
    hits = state.ms().context.knowledge.search(
        query, limit=kw["limit"], category=kw["category"], tags=list(kw["tags"]), mode=kw["mode"]
    )
    _emit(kw["as_json"], hits, lambda: _show_hits(hits))


@knowledge.command("list")
@click.option("--category", default=None)
@_list_options
@json_option
@click.pass_obj
def knowledge_list(state: _Context, /, **kw: Any) -> None:
    """List knowledge (latest versions), oldest first."""
    page = state.ms().context.knowledge.list(
        category=kw["category"], tags=list(kw["tags"]), limit=kw["limit"], cursor=kw["cursor"]
    )
    _emit(kw["as_json"], page, lambda: _show_page(page))


_common(knowledge, "knowledge", "knowledge item")


# -- learnings --------------------------------------------------------------------------


@learning.command("save")
@click.argument("trigger")
@click.option("--fix", default="", help="What resolved it.")
@click.option("--error-pattern", default="", help="The error text or pattern.")
@click.option("--diagnosis", default="", help="Why it happened.")
@click.option(
    "--category",
    default=None,
    help="tool_error, provider_error, user_correction, timeout, permission, general.",
)
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@json_option
@click.pass_obj
def learning_save(state: _Context, /, trigger: str, **kw: Any) -> None:
    """Record a learning (a known TRIGGER counts another occurrence)."""
    item = state.ms().context.learnings.save(
        trigger,
        kw["fix"],
        error_pattern=kw["error_pattern"],
        diagnosis=kw["diagnosis"],
        category=kw["category"],
        tags=list(kw["tags"]),
    )
    _emit(kw["as_json"], item, lambda: _show(item))


@learning.command("outcome")
@click.argument("trigger")
@click.option("--success/--failure", required=True, help="Whether the fix worked this time.")
@json_option
@click.pass_obj
def learning_outcome(state: _Context, /, trigger: str, success: bool, as_json: bool) -> None:
    """Count one application of a learning's fix (updates its confidence)."""
    item = state.ms().context.learnings.record_outcome(trigger, success)
    _emit(as_json, item, lambda: _show(item))


@learning.command("search")
@click.argument("query")
@click.option("--category", default=None)
@_search_options
@json_option
@click.pass_obj
def learning_search(state: _Context, /, query: str, **kw: Any) -> None:
    """Search learnings."""
    hits = state.ms().context.learnings.search(
        query, limit=kw["limit"], category=kw["category"], tags=list(kw["tags"]), mode=kw["mode"]
    )
    _emit(kw["as_json"], hits, lambda: _show_hits(hits))


@learning.command("list")
@click.option("--category", default=None)
@_list_options
@json_option
@click.pass_obj
def learning_list(state: _Context, /, **kw: Any) -> None:
    """List learnings, oldest first."""
    page = state.ms().context.learnings.list(
        category=kw["category"], tags=list(kw["tags"]), limit=kw["limit"], cursor=kw["cursor"]
    )
    _emit(kw["as_json"], page, lambda: _show_page(page))


_common(learning, "learnings", "learning")


# -- skills -----------------------------------------------------------------------------


@skill.command("save")
@click.argument("name")
@click.argument("description")
@click.option(
    "--type",
    "skill_type",
    default="composite",
    show_default=True,
    help="composite, script or template.",
)
@click.option("--definition", default="", help="Steps, a script or a template.")
@click.option("--parameters", default=None, help="JSON object describing the parameters.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@json_option
@click.pass_obj
def skill_save(state: _Context, /, name: str, description: str, **kw: Any) -> None:
    """Save a skill (replaces one of the same NAME)."""
    item = state.ms().context.skills.save(
        name,
        description,
        type=kw["skill_type"],
        definition=kw["definition"],
        parameters=_parse_json(kw["parameters"], "parameters", ErrorCode.INVALID_ARGUMENT),
        tags=list(kw["tags"]),
    )
    _emit(kw["as_json"], item, lambda: _show(item))


@skill.command("search")
@click.argument("query")
@click.option("--type", "skill_type", default=None)
@_search_options
@json_option
@click.pass_obj
def skill_search(state: _Context, /, query: str, **kw: Any) -> None:
    """Search skills."""
    hits = state.ms().context.skills.search(
        query, limit=kw["limit"], type=kw["skill_type"], tags=list(kw["tags"]), mode=kw["mode"]
    )
    _emit(kw["as_json"], hits, lambda: _show_hits(hits))


@skill.command("list")
@click.option("--type", "skill_type", default=None)
@_list_options
@json_option
@click.pass_obj
def skill_list(state: _Context, /, **kw: Any) -> None:
    """List skills, oldest first."""
    page = state.ms().context.skills.list(
        type=kw["skill_type"], tags=list(kw["tags"]), limit=kw["limit"], cursor=kw["cursor"]
    )
    _emit(kw["as_json"], page, lambda: _show_page(page))


_common(skill, "skills", "skill")


# -- references -------------------------------------------------------------------------


@ref.command("save")
@click.argument("name")
@click.argument("location")
@click.option(
    "--type", "ref_type", default="url", show_default=True, help="url, document, repository, ..."
)
@click.option("--summary", default="", help="What it holds.")
@click.option("--metadata", default=None, help="JSON object.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@json_option
@click.pass_obj
def ref_save(state: _Context, /, name: str, location: str, **kw: Any) -> None:
    """Save a reference (replaces one of the same NAME)."""
    item = state.ms().context.references.save(
        name,
        location,
        ref_type=kw["ref_type"],
        summary=kw["summary"],
        metadata=_parse_json(kw["metadata"], "metadata", ErrorCode.INVALID_ARGUMENT),
        tags=list(kw["tags"]),
    )
    _emit(kw["as_json"], item, lambda: _show(item))


@ref.command("search")
@click.argument("query")
@click.option("--type", "ref_type", default=None)
@_search_options
@json_option
@click.pass_obj
def ref_search(state: _Context, /, query: str, **kw: Any) -> None:
    """Search references."""
    hits = state.ms().context.references.search(
        query, limit=kw["limit"], ref_type=kw["ref_type"], tags=list(kw["tags"]), mode=kw["mode"]
    )
    _emit(kw["as_json"], hits, lambda: _show_hits(hits))


@ref.command("list")
@click.option("--type", "ref_type", default=None)
@_list_options
@json_option
@click.pass_obj
def ref_list(state: _Context, /, **kw: Any) -> None:
    """List references, oldest first."""
    page = state.ms().context.references.list(
        ref_type=kw["ref_type"], tags=list(kw["tags"]), limit=kw["limit"], cursor=kw["cursor"]
    )
    _emit(kw["as_json"], page, lambda: _show_page(page))


_common(ref, "references", "reference")


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
def context_retrieve(state: _Context, /, query: str, **kw: Any) -> None:
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

    _emit(kw["as_json"], result, human)


@context.command("prompt")
@click.argument("query")
@click.option("--base", default="", help="The base system prompt.")
@click.option("--layer", "layers", multiple=True, help="A context layer (repeatable).")
@click.option("--session", "session_key", default=None, help="Session key.")
@click.option("--user-id", default=None, help="Add the user's relevant memories.")
@json_option
@click.pass_obj
def context_prompt(state: _Context, /, query: str, **kw: Any) -> None:
    """Print the system prompt assembled for QUERY."""
    ids = {"user_id": kw["user_id"]} if kw["user_id"] else None
    prompt = state.ms().context.build_prompt(
        kw["base"],
        query,
        layers=list(kw["layers"]) or None,
        session_key=kw["session_key"],
        identifiers=ids,
    )
    _emit(kw["as_json"], {"prompt": prompt}, lambda: click.echo(prompt))
