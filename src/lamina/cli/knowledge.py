"""``lamina knowledge ...``: the git-backed knowledge repository (mirrors ms.knowledge)."""

from __future__ import annotations

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
    read_text,
    tag_option,
)
from lamina.cli.output import cell, print_hits, print_page, progress
from lamina.errors import ErrorCode, LaminaError

__all__ = ["knowledge"]


@click.group("knowledge")
def knowledge() -> None:
    """The git-backed knowledge repository: ADRs, policies, patterns, specs."""


def _where(item: Any) -> str:
    return str(item.layer.value) + (f"/{item.layer_id}" if item.layer_id else "")


def _details(item: Any) -> list[str]:
    """An item's summary, lists and policy, one line each (what it has of them)."""
    lines = [item.summary] if item.summary else []
    for name in ("tags", "constraints", "authors", "related", "supersedes"):
        value = getattr(item, name)
        if value:
            lines.append(f"{name}: {', '.join(value)}")
    if item.superseded_by:
        lines.append(f"superseded_by: {item.superseded_by}")
    if item.rules:
        lines.append(
            f"policy: {item.mode.value}, {item.merge_strategy.value}, {len(item.rules)} rules"
        )
    return lines


def _show(item: Any) -> None:
    click.echo(f"{item.id}  [{item.type.value}, {_where(item)}, {item.status.value}]  {item.title}")
    for line in _details(item):
        click.echo(f"  {line}")


#: The columns of an item in lists and search results.
_COLUMNS = ["id", "type", "layer", "status", "title"]


def _row(item: Any) -> list[Any]:
    return [
        item.id,
        item.type.value,
        _where(item),
        item.status.value,
        cell(item.title, *_details(item)),
    ]


def _show_change(change: Any) -> None:
    _show(change.item)
    click.echo(f"  commit {change.commit}  ({change.item.path})")
    for v in change.violations:
        click.echo(f"  {v.severity.value}: {v.policy_id}/{v.rule_id}: {v.message}")


_content_options = options(
    click.option("--summary", default=None, help="One or two sentences."),
    click.option("--body", default=None, help="The Markdown body."),
    click.option("--body-file", default=None, help="Read the body from a file ('-': stdin)."),
    click.option("--severity", default=None, help="info, warn or block."),
    tag_option,
    click.option("--constraint", "constraints", multiple=True, help="A constraint (repeatable)."),
    click.option("--related", multiple=True, help="A related item id (repeatable)."),
    click.option("--policy-id", default=None, help="Policies: the policy it defines or changes."),
    click.option("--mode", default=None, help="Policies: mandatory or optional."),
    click.option("--merge-strategy", default=None, help="Policies: override, merge, intersect."),
    click.option("--rules", default=None, help="Policies: the rules as a JSON list."),
    click.option("--rules-file", default=None, help="Policies: read the rules JSON from a file."),
    click.option("--author", default="lamina", show_default=True, help="Commit author."),
    click.option("--message", default=None, help="Commit message."),
)


def _content(kw: dict[str, Any]) -> dict[str, Any]:
    body = kw.pop("body")
    body_file = kw.pop("body_file")
    if body is not None and body_file is not None:
        raise LaminaError(ErrorCode.INVALID_ARGUMENT, "give --body or --body-file, not both")
    kw["body"] = body if body_file is None else read_text(body_file, "body-file")
    rules, rules_file = kw.pop("rules"), kw.pop("rules_file")
    raw = rules if rules_file is None else read_text(rules_file, "rules-file")
    kw["rules"] = parse_json(raw, "rules", ErrorCode.INVALID_ARGUMENT)
    for name in ("tags", "constraints", "related"):
        kw[name] = list(kw[name]) or None
    return kw


@knowledge.command("create")
@click.argument("type_")
@click.argument("title")
@click.option("--layer", required=True, help="company, org, team or project.")
@click.option("--layer-id", default=None, help="The org, team or project id.")
@click.option("--id", "id_", default=None, help="The item id (default: <type>-<n>).")
@click.option("--status", default="draft", show_default=True, help="draft, proposed, accepted.")
@click.option("--supersedes", multiple=True, help="An item id this one supersedes.")
@_content_options
@json_option
@click.pass_obj
def knowledge_create(state: State, /, type_: str, title: str, **kw: Any) -> None:
    """Add an item of TYPE (adr, policy, pattern, spec): one commit."""
    as_json = kw.pop("as_json")
    kw = _content(kw)
    kw["supersedes"] = list(kw["supersedes"]) or None
    kw["id"] = kw.pop("id_")
    kw["severity"] = kw["severity"] or "info"
    change = state.ms().knowledge.create(type_, title, **kw)
    emit(as_json, change, lambda: _show_change(change))


@knowledge.command("update")
@click.argument("item_id")
@click.option("--title", default=None)
@_content_options
@json_option
@click.pass_obj
def knowledge_update(state: State, /, item_id: str, **kw: Any) -> None:
    """Change an item's content (fields not given stay): one commit."""
    as_json = kw.pop("as_json")
    change = state.ms().knowledge.update(item_id, **_content(kw))
    emit(as_json, change, lambda: _show_change(change))


@knowledge.command("status")
@click.argument("item_id")
@click.argument("status")
@click.option("--superseded-by", default=None, help="With superseded: the successor's id.")
@click.option("--author", default="lamina", show_default=True)
@click.option("--message", default=None)
@json_option
@click.pass_obj
def knowledge_status(state: State, /, item_id: str, status: str, **kw: Any) -> None:
    """Move an item to STATUS (proposed, accepted, rejected, deprecated, superseded)."""
    as_json = kw.pop("as_json")
    change = state.ms().knowledge.set_status(item_id, status, **kw)
    emit(as_json, change, lambda: _show_change(change))


@knowledge.command("get")
@click.argument("item_id")
@click.option("--history", is_flag=True, help="Also the commits that changed it.")
@json_option
@click.pass_obj
def knowledge_get(state: State, /, item_id: str, history: bool, as_json: bool) -> None:
    """Show an item as it is at the repository's head."""
    found = state.ms().knowledge.get(item_id, history=history)

    def human() -> None:
        item = found.item if history else found
        _show(item)
        click.echo(f"  path: {item.path}  commit: {item.commit}")
        if item.body:
            click.echo("")
            click.echo(item.body.rstrip())
        if history:
            click.echo("")
            _show_history(found.history)

    emit(as_json, found, human)


def _show_history(entries: list[Any]) -> None:
    for e in entries:
        status = f" [{e.status.value}]" if e.status else (" [deleted]" if e.deleted else "")
        click.echo(f"{e.commit[:12]}  {e.timestamp:%Y-%m-%d %H:%M:%S}  {e.author}{status}")
        click.echo(f"  {e.message}")


_filter_options = options(
    click.option("--type", "type_", default=None, help="adr, policy, pattern or spec."),
    click.option("--layer", default=None, help="company, org, team or project."),
    click.option("--layer-id", default=None, help="The org, team or project id."),
    click.option("--status", default="accepted", show_default=True, help="A status, or 'any'."),
    any_tags_option,
    click.option("--limit", type=int, default=None, help="Most results."),
)


def _filters(kw: dict[str, Any]) -> dict[str, Any]:
    kw["type"] = kw.pop("type_")
    kw["tags"] = list(kw["tags"]) or None
    return kw


@knowledge.command("list")
@_filter_options
@cursor_option
@json_option
@click.pass_obj
def knowledge_list(state: State, /, **kw: Any) -> None:
    """Items, oldest first (status accepted unless --status says otherwise)."""
    as_json = kw.pop("as_json")
    page = state.ms().knowledge.list(**_filters(kw))

    emit(as_json, page, lambda: print_page(_COLUMNS, [_row(i) for i in page.items], page))


@knowledge.command("search")
@click.argument("query")
@_filter_options
@click.option("--mode", default=None, help="hybrid, semantic or keyword.")
@json_option
@click.pass_obj
def knowledge_search(state: State, /, query: str, **kw: Any) -> None:
    """Search items by meaning and keywords."""
    as_json = kw.pop("as_json")
    hits = state.ms().knowledge.search(query, **_filters(kw))

    rows = [[f"{hit.score:.3f}", *_row(hit.item)] for hit in hits]
    emit(as_json, hits, lambda: print_hits(["score", *_COLUMNS], rows))


@knowledge.command("history")
@click.argument("item_id")
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
@click.pass_obj
def knowledge_history(state: State, /, item_id: str, limit: int, as_json: bool) -> None:
    """The commits that changed an item, newest first."""
    entries = state.ms().knowledge.history(item_id, limit=limit)
    emit(as_json, entries, lambda: _show_history(entries))


@knowledge.command("diff")
@click.argument("item_id")
@click.option("--from", "from_commit", default=None, help="From this commit (default: previous).")
@click.option("--to", "to_commit", default=None, help="To this commit (default: head).")
@json_option
@click.pass_obj
def knowledge_diff(state: State, /, item_id: str, as_json: bool, **kw: Any) -> None:
    """A unified diff of an item between two commits."""
    diff = state.ms().knowledge.diff(item_id, **kw)
    emit(as_json, diff, lambda: click.echo(diff.diff or "no change", nl=not diff.diff))


def _show_promotion(p: Any) -> None:
    target = p.target_layer.value + (f"/{p.target_layer_id}" if p.target_layer_id else "")
    click.echo(f"{p.id}  {p.item_id} -> {target}  [{p.status.value}]")
    for e in p.events:
        extra = f" ({e.reason})" if e.reason else ""
        click.echo(f"  {e.at:%Y-%m-%d %H:%M:%S}  {e.author}: {e.decision}{extra}")
    if p.promoted_id:
        click.echo(f"  promoted as {p.promoted_id} ({p.approval.value})")


#: The options that close promote and decide: why, and who.
_note_options = options(
    click.option("--reason", default=None),
    click.option("--author", default="lamina", show_default=True),
)


def _promotion_args(kw: dict[str, Any]) -> dict[str, Any]:
    """The arguments promote and decide share: target layer and id, reason, author."""
    return {
        "target_layer": kw["to_layer"],
        "target_layer_id": kw["to_layer_id"],
        "reason": kw["reason"],
        "author": kw["author"],
    }


@knowledge.command("promote")
@click.argument("item_id")
@click.option("--to-layer", required=True, help="A strictly higher layer: org, team or company.")
@click.option("--to-layer-id", default=None, help="Its id (none for company).")
@_note_options
@json_option
@click.pass_obj
def knowledge_promote(state: State, /, item_id: str, as_json: bool, **kw: Any) -> None:
    """Request that an accepted item move to a higher layer (decide with `decide`)."""
    promotion = state.ms().knowledge.promotions.request(item_id, **_promotion_args(kw))
    emit(as_json, promotion, lambda: _show_promotion(promotion))


@knowledge.command("decide")
@click.argument("promotion_id")
@click.argument("decision")
@click.option(
    "--approval",
    default=None,
    help="With approve: replacement, specialization, applicability, exception or clarification.",
)
@click.option("--to-layer", default=None, help="With retarget: the new target layer.")
@click.option("--to-layer-id", default=None, help="With retarget: its id.")
@click.option("--new-id", default=None, help="With approve: the promoted item's id.")
@_note_options
@json_option
@click.pass_obj
def knowledge_decide(
    state: State, /, promotion_id: str, decision: str, as_json: bool, **kw: Any
) -> None:
    """Decide a promotion: approve, reject, needs_refinement or retarget."""
    promotion = state.ms().knowledge.promotions.decide(
        promotion_id,
        decision,
        approval=kw["approval"],
        new_id=kw["new_id"],
        **_promotion_args(kw),
    )
    emit(as_json, promotion, lambda: _show_promotion(promotion))


@knowledge.command("promotions")
@click.option("--status", default=None, help="pending, needs_refinement, approved, rejected.")
@json_option
@click.pass_obj
def knowledge_promotions(state: State, /, status: str | None, as_json: bool) -> None:
    """Promotion requests, oldest first."""
    found = state.ms().knowledge.promotions.list(status=status)

    def human() -> None:
        for p in found:
            _show_promotion(p)
        click.echo(f"{len(found)} promotion(s)")

    emit(as_json, found, human)


@knowledge.command("reindex")
@click.option("--full", is_flag=True, help="Rebuild the whole index, not only what changed.")
@json_option
@click.pass_obj
def knowledge_reindex(state: State, /, full: bool, as_json: bool) -> None:
    """Bring the search index up to the repository's head."""
    ks = state.ms().knowledge
    with progress("indexing knowledge", as_json=as_json) as on_progress:
        result = (ks.rebuild if full else ks.sync)(on_progress=on_progress)
    emit(
        as_json,
        result,
        lambda: click.echo(
            f"index at {result['commit']}: {result['indexed']} indexed, "
            f"{result['removed']} removed{' (full)' if result['full'] else ''}"
        ),
    )
