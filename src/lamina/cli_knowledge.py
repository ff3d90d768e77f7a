"""``lamina knowledge ...`` and ``lamina governance ...`` (mirror ms.knowledge and
ms.governance)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from lamina.cli import _Context, _emit, _parse_json, cli, json_option
from lamina.errors import ErrorCode, LaminaError


@cli.group()
def knowledge() -> None:
    """The git-backed knowledge repository: ADRs, policies, patterns, specs."""


@cli.group()
def governance() -> None:
    """Policies in force at a layer, validation and drift."""


def _read(path: str | None, what: str) -> str | None:
    if path is None:
        return None
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT, f"--{what}: cannot read {path}: {exc}"
        ) from None


def _show(item: Any) -> None:
    where = item.layer.value + (f"/{item.layer_id}" if item.layer_id else "")
    click.echo(f"{item.id}  [{item.type.value}, {where}, {item.status.value}]  {item.title}")
    if item.summary:
        click.echo(f"  {item.summary}")
    for name in ("tags", "constraints", "authors", "related", "supersedes"):
        value = getattr(item, name)
        if value:
            click.echo(f"  {name}: {', '.join(value)}")
    if item.superseded_by:
        click.echo(f"  superseded_by: {item.superseded_by}")
    if item.rules:
        click.echo(
            f"  policy: {item.mode.value}, {item.merge_strategy.value}, {len(item.rules)} rules"
        )


def _show_change(change: Any) -> None:
    _show(change.item)
    click.echo(f"  commit {change.commit}  ({change.item.path})")
    for v in change.violations:
        click.echo(f"  {v.severity.value}: {v.policy_id}/{v.rule_id}: {v.message}")


def _content_options(fn: Any) -> Any:
    opts = [
        click.option("--summary", default=None, help="One or two sentences."),
        click.option("--body", default=None, help="The Markdown body."),
        click.option("--body-file", default=None, help="Read the body from a file ('-': stdin)."),
        click.option("--severity", default=None, help="info, warn or block."),
        click.option("--tag", "tags", multiple=True, help="A tag (repeatable)."),
        click.option(
            "--constraint", "constraints", multiple=True, help="A constraint (repeatable)."
        ),
        click.option("--related", multiple=True, help="A related item id (repeatable)."),
        click.option(
            "--policy-id", default=None, help="Policies: the policy it defines or changes."
        ),
        click.option("--mode", default=None, help="Policies: mandatory or optional."),
        click.option(
            "--merge-strategy", default=None, help="Policies: override, merge, intersect."
        ),
        click.option("--rules", default=None, help="Policies: the rules as a JSON list."),
        click.option(
            "--rules-file", default=None, help="Policies: read the rules JSON from a file."
        ),
        click.option("--author", default="lamina", show_default=True, help="Commit author."),
        click.option("--message", default=None, help="Commit message."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _content(kw: dict[str, Any]) -> dict[str, Any]:
    body = kw.pop("body")
    body_file = kw.pop("body_file")
    if body is not None and body_file is not None:
        raise LaminaError(ErrorCode.INVALID_ARGUMENT, "give --body or --body-file, not both")
    kw["body"] = body if body_file is None else _read(body_file, "body-file")
    rules, rules_file = kw.pop("rules"), kw.pop("rules_file")
    raw = rules if rules_file is None else _read(rules_file, "rules-file")
    kw["rules"] = _parse_json(raw, "rules", ErrorCode.INVALID_ARGUMENT)
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
def knowledge_create(state: _Context, /, type_: str, title: str, **kw: Any) -> None:
    """Add an item of TYPE (adr, policy, pattern, spec): one commit."""
    as_json = kw.pop("as_json")
    kw = _content(kw)
    kw["supersedes"] = list(kw["supersedes"]) or None
    kw["id"] = kw.pop("id_")
    kw["severity"] = kw["severity"] or "info"
    change = state.ms().knowledge.create(type_, title, **kw)
    _emit(as_json, change, lambda: _show_change(change))


@knowledge.command("update")
@click.argument("item_id")
@click.option("--title", default=None)
@_content_options
@json_option
@click.pass_obj
def knowledge_update(state: _Context, /, item_id: str, **kw: Any) -> None:
    """Change an item's content (fields not given stay): one commit."""
    as_json = kw.pop("as_json")
    change = state.ms().knowledge.update(item_id, **_content(kw))
    _emit(as_json, change, lambda: _show_change(change))


@knowledge.command("status")
@click.argument("item_id")
@click.argument("status")
@click.option("--superseded-by", default=None, help="With superseded: the successor's id.")
@click.option("--author", default="lamina", show_default=True)
@click.option("--message", default=None)
@json_option
@click.pass_obj
def knowledge_status(state: _Context, /, item_id: str, status: str, **kw: Any) -> None:
    """Move an item to STATUS (proposed, accepted, rejected, deprecated, superseded)."""
    as_json = kw.pop("as_json")
    change = state.ms().knowledge.set_status(item_id, status, **kw)
    _emit(as_json, change, lambda: _show_change(change))


@knowledge.command("get")
@click.argument("item_id")
@click.option("--history", is_flag=True, help="Also the commits that changed it.")
@json_option
@click.pass_obj
def knowledge_get(state: _Context, /, item_id: str, history: bool, as_json: bool) -> None:
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

    _emit(as_json, found, human)


def _show_history(entries: list[Any]) -> None:
    for e in entries:
        status = f" [{e.status.value}]" if e.status else (" [deleted]" if e.deleted else "")
        click.echo(f"{e.commit[:12]}  {e.timestamp:%Y-%m-%d %H:%M:%S}  {e.author}{status}")
        click.echo(f"  {e.message}")


def _filter_options(fn: Any) -> Any:
    opts = [
        click.option("--type", "type_", default=None, help="adr, policy, pattern or spec."),
        click.option("--layer", default=None, help="company, org, team or project."),
        click.option("--layer-id", default=None, help="The org, team or project id."),
        click.option("--status", default="accepted", show_default=True, help="A status, or 'any'."),
        click.option("--tag", "tags", multiple=True, help="Any of these tags (repeatable)."),
        click.option("--limit", type=int, default=None, help="Most results."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _filters(kw: dict[str, Any]) -> dict[str, Any]:
    kw["type"] = kw.pop("type_")
    kw["tags"] = list(kw["tags"]) or None
    return kw


@knowledge.command("list")
@_filter_options
@click.option("--cursor", default=None, help="next_cursor of the previous page.")
@json_option
@click.pass_obj
def knowledge_list(state: _Context, /, **kw: Any) -> None:
    """Items, oldest first (status accepted unless --status says otherwise)."""
    as_json = kw.pop("as_json")
    page = state.ms().knowledge.list(**_filters(kw))

    def human() -> None:
        for item in page.items:
            _show(item)
        click.echo(f"{len(page.items)} of {page.total_count}")
        if page.next_cursor:
            click.echo(f"next page: --cursor {page.next_cursor}")

    _emit(as_json, page, human)


@knowledge.command("search")
@click.argument("query")
@_filter_options
@click.option("--mode", default=None, help="hybrid, semantic or keyword.")
@json_option
@click.pass_obj
def knowledge_search(state: _Context, /, query: str, **kw: Any) -> None:
    """Search items by meaning and keywords."""
    as_json = kw.pop("as_json")
    hits = state.ms().knowledge.search(query, **_filters(kw))

    def human() -> None:
        if not hits:
            click.echo("nothing found")
        for hit in hits:
            click.echo(f"{hit.score:.3f}  ", nl=False)
            _show(hit.item)

    _emit(as_json, hits, human)


@knowledge.command("history")
@click.argument("item_id")
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
@click.pass_obj
def knowledge_history(state: _Context, /, item_id: str, limit: int, as_json: bool) -> None:
    """The commits that changed an item, newest first."""
    entries = state.ms().knowledge.history(item_id, limit=limit)
    _emit(as_json, entries, lambda: _show_history(entries))


@knowledge.command("diff")
@click.argument("item_id")
@click.option("--from", "from_commit", default=None, help="From this commit (default: previous).")
@click.option("--to", "to_commit", default=None, help="To this commit (default: head).")
@json_option
@click.pass_obj
def knowledge_diff(state: _Context, /, item_id: str, as_json: bool, **kw: Any) -> None:
    """A unified diff of an item between two commits."""
    diff = state.ms().knowledge.diff(item_id, **kw)
    _emit(as_json, diff, lambda: click.echo(diff.diff or "no change", nl=not diff.diff))


def _show_promotion(p: Any) -> None:
    target = p.target_layer.value + (f"/{p.target_layer_id}" if p.target_layer_id else "")
    click.echo(f"{p.id}  {p.item_id} -> {target}  [{p.status.value}]")
    for e in p.events:
        extra = f" ({e.reason})" if e.reason else ""
        click.echo(f"  {e.at:%Y-%m-%d %H:%M:%S}  {e.author}: {e.decision}{extra}")
    if p.promoted_id:
        click.echo(f"  promoted as {p.promoted_id} ({p.approval.value})")


@knowledge.command("promote")
@click.argument("item_id")
@click.option("--to-layer", required=True, help="A strictly higher layer: org, team or company.")
@click.option("--to-layer-id", default=None, help="Its id (none for company).")
@click.option("--reason", default=None)
@click.option("--author", default="lamina", show_default=True)
@json_option
@click.pass_obj
def knowledge_promote(state: _Context, /, item_id: str, as_json: bool, **kw: Any) -> None:
    """Request that an accepted item move to a higher layer (decide with `decide`)."""
    promotion = state.ms().knowledge.promotions.request(
        item_id,
        target_layer=kw["to_layer"],
        target_layer_id=kw["to_layer_id"],
        reason=kw["reason"],
        author=kw["author"],
    )
    _emit(as_json, promotion, lambda: _show_promotion(promotion))


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
@click.option("--reason", default=None)
@click.option("--author", default="lamina", show_default=True)
@json_option
@click.pass_obj
def knowledge_decide(
    state: _Context, /, promotion_id: str, decision: str, as_json: bool, **kw: Any
) -> None:
    """Decide a promotion: approve, reject, needs_refinement or retarget."""
    promotion = state.ms().knowledge.promotions.decide(
        promotion_id,
        decision,
        approval=kw["approval"],
        target_layer=kw["to_layer"],
        target_layer_id=kw["to_layer_id"],
        new_id=kw["new_id"],
        reason=kw["reason"],
        author=kw["author"],
    )
    _emit(as_json, promotion, lambda: _show_promotion(promotion))


@knowledge.command("promotions")
@click.option("--status", default=None, help="pending, needs_refinement, approved, rejected.")
@json_option
@click.pass_obj
def knowledge_promotions(state: _Context, /, status: str | None, as_json: bool) -> None:
    """Promotion requests, oldest first."""
    found = state.ms().knowledge.promotions.list(status=status)

    def human() -> None:
        for p in found:
            _show_promotion(p)
        click.echo(f"{len(found)} promotion(s)")

    _emit(as_json, found, human)


@knowledge.command("reindex")
@click.option("--full", is_flag=True, help="Rebuild the whole index, not only what changed.")
@json_option
@click.pass_obj
def knowledge_reindex(state: _Context, /, full: bool, as_json: bool) -> None:
    """Bring the search index up to the repository's head."""
    ks = state.ms().knowledge
    result = ks.rebuild() if full else ks.sync()
    _emit(
        as_json,
        result,
        lambda: click.echo(
            f"index at {result['commit']}: {result['indexed']} indexed, "
            f"{result['removed']} removed{' (full)' if result['full'] else ''}"
        ),
    )


# -- governance ----------------------------------------------------------------------------


def _layer_options(fn: Any) -> Any:
    fn = click.option("--layer-id", default=None, help="The org, team or project id.")(fn)
    return click.option(
        "--layer", default="company", show_default=True, help="company, org, team or project."
    )(fn)


def _context_options(fn: Any) -> Any:
    opts = [
        click.option("--file", "file_", default=None, help="Validate this file: path and content."),
        click.option("--path", default=None, help="The path to check (file rules)."),
        click.option("--content", default=None, help="The content to check (code rules)."),
        click.option(
            "--dependency", "dependencies", multiple=True, help="A dependency (repeatable)."
        ),
        click.option("--import", "imports", multiple=True, help="An import (repeatable)."),
        click.option("--config-json", default=None, help="Configuration as a JSON object."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _context(kw: dict[str, Any]) -> dict[str, Any]:
    ctx: dict[str, Any] = {}
    file_ = kw.pop("file_")
    if file_ is not None:
        ctx["path"] = file_
        ctx["content"] = _read(file_, "file")
    for name in ("path", "content"):
        value = kw.pop(name)
        if value is not None:
            ctx[name] = value
    for name in ("dependencies", "imports"):
        value = list(kw.pop(name))
        if value:
            ctx[name] = value
    config = _parse_json(kw.pop("config_json"), "config-json", ErrorCode.INVALID_ARGUMENT)
    if config is not None:
        ctx["config"] = config
    if not ctx:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            "nothing to validate: give --file, --path, --content, --dependency, --import or "
            "--config-json",
        )
    return ctx


def _show_violations(violations: list[Any]) -> None:
    for v in violations:
        where = v.context.get("path", "")
        line = f":{v.context['line']}" if "line" in v.context else ""
        click.echo(f"{v.severity.value:5}  {v.policy_id}/{v.rule_id}  {where}{line}  {v.message}")


@governance.command("validate")
@_layer_options
@_context_options
@json_option
@click.pass_obj
def governance_validate(
    state: _Context, /, layer: str, layer_id: str | None, as_json: bool, **kw: Any
) -> None:
    """Check a file, dependencies, imports or config against the layer's policies. Exits
    with status 3 when a block violation makes it invalid."""
    result = state.ms().governance.validate(layer, _context(kw), layer_id)

    def human() -> None:
        _show_violations(result.violations)
        click.echo(
            f"{'valid' if result.is_valid else 'INVALID'}: {len(result.violations)} violation(s), "
            f"{result.rules_evaluated} rules from {len(result.policies_applied)} policies"
        )

    _emit(as_json, result, human)
    if not result.is_valid:
        sys.exit(3)


@governance.command("drift")
@_layer_options
@click.option("--file", "files", multiple=True, help="A file to check (repeatable).")
@click.option("--contexts-json", default=None, help="A JSON list of context objects.")
@json_option
@click.pass_obj
def governance_drift(
    state: _Context,
    /,
    layer: str,
    layer_id: str | None,
    files: tuple[str, ...],
    contexts_json: str | None,
    as_json: bool,
) -> None:
    """How far files (or contexts) drift from the layer's policies: a score in [0, 1]."""
    contexts: list[Any] = [{"path": f, "content": _read(f, "file")} for f in files]
    extra = _parse_json(contexts_json, "contexts-json", ErrorCode.INVALID_ARGUMENT)
    if extra is not None:
        if not isinstance(extra, list):
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "--contexts-json must be a list")
        contexts.extend(extra)
    report = state.ms().governance.drift(layer, contexts, layer_id)

    def human() -> None:
        _show_violations(report.violations)
        counts = ", ".join(f"{n} {s}" for s, n in report.counts.items())
        click.echo(f"drift {report.score:.3f} over {report.contexts} context(s): {counts}")

    _emit(as_json, report, human)


@governance.command("policies")
@_layer_options
@json_option
@click.pass_obj
def governance_policies(
    state: _Context, /, layer: str, layer_id: str | None, as_json: bool
) -> None:
    """The policies in force at a layer, merged from the company down."""
    policies = state.ms().governance.policies(layer, layer_id)

    def human() -> None:
        for p in policies:
            where = p.layer + (f"/{p.layer_id}" if p.layer_id else "")
            click.echo(f"{p.id}  [{where}, {p.mode.value}, {p.merge_strategy.value}]  {p.name}")
            for r in p.rules:
                click.echo(
                    f"  {r.id}: {r.type.value} {r.target.value} {r.operator.value} "
                    f"{r.value!r} ({r.severity.value})"
                )
        click.echo(f"{len(policies)} policies")

    _emit(as_json, policies, human)
