"""The lamina command line. Every command mirrors a library call and can print JSON."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.models import HierarchyLink
from lamina.runtime import Lamina

F = TypeVar("F", bound=Callable[..., Any])
IDENTIFIERS = ("agent_id", "user_id", "session_id", "project_id", "team_id", "org_id", "company_id")


class _Context:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self._ms: Lamina | None = None

    def ms(self) -> Lamina:
        if self._ms is None:
            self._ms = Lamina(**self.options)
        return self._ms

    def close(self) -> None:
        if self._ms is not None:
            self._ms.close()


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _emit(as_json: bool, value: Any, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(_jsonable(value), ensure_ascii=False, indent=2))
    else:
        human()


def _parse_json(raw: str | None, what: str, code: ErrorCode) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LaminaError(code, f"--{what} is not valid JSON: {exc.msg}") from None


def identifier_options(fn: F) -> F:
    for name in reversed(IDENTIFIERS):
        flag = "--" + name.replace("_", "-")
        fn = click.option(flag, name, default=None, help=f"The {name.replace('_', ' ')}.")(fn)
    return fn


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def _ids(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {name: kwargs.pop(name) for name in IDENTIFIERS}


def _show_entry(entry: Any) -> None:
    ids = ", ".join(f"{k}={v}" for k, v in entry.identifiers.items())
    click.echo(f"{entry.id}  [{entry.layer.value}: {ids}]  {entry.updated_at:%Y-%m-%d %H:%M:%S}")
    click.echo(f"  {entry.content}")
    if entry.metadata:
        click.echo(f"  metadata: {json.dumps(entry.metadata, ensure_ascii=False)}")


def _show_links(links: list[HierarchyLink]) -> None:
    for link in links:
        click.echo(f"{link.level} {link.child_id} -> {link.parent_id}")


@click.group()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Data directory (default: LAMINA_DATA_DIR or the user data directory).",
)
@click.option(
    "--database-url",
    default=None,
    help="sqlite:///path/to/file.db or postgresql://user@host:port/db (default: the SQLite "
    "file in the data directory).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A TOML settings file (default: LAMINA_CONFIG).",
)
@click.option("--tenant", "tenant_id", default=None, help="Tenant (default: 'default').")
@click.version_option(package_name="lamina")
@click.pass_context
def cli(
    ctx: click.Context,
    data_dir: Path | None,
    database_url: str | None,
    config_file: Path | None,
    tenant_id: str | None,
) -> None:
    """lamina: layered long-term memory for AI agents."""
    state = _Context(
        {
            "data_dir": data_dir,
            "database_url": database_url,
            "config_file": config_file,
            "tenant_id": tenant_id,
        }
    )
    ctx.obj = state
    ctx.call_on_close(state.close)


@cli.group()
def memory() -> None:
    """Add, search, get, update, delete, list memories and read their history."""


@memory.command("add")
@click.argument("content")
@click.option("--layer", required=True, help="agent, user, session, project, team, org, company.")
@identifier_options
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--metadata", default=None, help="Metadata as a JSON object.")
@click.option("--actor", default=None, help="Who makes the change (recorded in history).")
@json_option
@click.pass_obj
def memory_add(state: _Context, /, content: str, layer: str, **kw: Any) -> None:
    """Store CONTENT as a memory in a layer."""
    as_json, tags, actor = kw.pop("as_json"), kw.pop("tags"), kw.pop("actor")
    metadata = _parse_json(kw.pop("metadata"), "metadata", ErrorCode.INVALID_ARGUMENT)
    if tags:
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "--metadata must be a JSON object")
        existing = metadata.get("tags") or []
        metadata["tags"] = [*existing, *tags] if isinstance(existing, list) else existing
    entry = state.ms().memory.add(content, layer=layer, metadata=metadata, actor=actor, **_ids(kw))
    _emit(as_json, entry, lambda: _show_entry(entry))


@memory.command("embed-pending")
@json_option
@click.pass_obj
def memory_embed_pending(state: _Context, /, as_json: bool) -> None:
    """Embed the memories still waiting for an embedding (added with background embedding)."""
    count = state.ms().memory.embed_pending()
    _emit(as_json, {"embedded": count}, lambda: click.echo(f"embedded {count} memories"))


@memory.command("search")
@click.argument("query")
@identifier_options
@click.option("--layer", "layers", multiple=True, help="Only this layer (repeatable).")
@click.option("--mode", default="semantic", show_default=True, help="semantic, keyword, hybrid.")
@click.option("--threshold", type=float, default=None, help="Minimum score (mode's scale).")
@click.option("--limit", type=int, default=None, help="Most results (default 10).")
@click.option("--tag", "tags", multiple=True, help="Any of these tags (repeatable).")
@click.option("--filter", "filters", default=None, help='Metadata filter JSON: {"f": {"gte": 2}}.')
@json_option
@click.pass_obj
def memory_search(state: _Context, /, query: str, **kw: Any) -> None:
    """Search memories of every reachable layer, most specific layer first."""
    as_json = kw.pop("as_json")
    filters = _parse_json(kw.pop("filters"), "filter", ErrorCode.INVALID_FILTER)
    hits = state.ms().memory.search(
        query,
        layers=list(kw.pop("layers")) or None,
        tags=list(kw.pop("tags")) or None,
        filters=filters,
        mode=kw.pop("mode"),
        threshold=kw.pop("threshold"),
        limit=kw.pop("limit"),
        **_ids(kw),
    )

    def human() -> None:
        if not hits:
            click.echo("no memories found")
        for hit in hits:
            click.echo(f"{hit.score:.3f}  ", nl=False)
            _show_entry(hit.memory)

    _emit(as_json, hits, human)


@memory.command("get")
@click.argument("memory_id")
@json_option
@click.pass_obj
def memory_get(state: _Context, memory_id: str, as_json: bool) -> None:
    """Show one memory (exit status 1 when there is none)."""
    entry = state.ms().memory.get(memory_id)
    if entry is None:
        raise LaminaError(
            ErrorCode.MEMORY_NOT_FOUND, f"memory {memory_id!r} not found", details={"id": memory_id}
        )
    _emit(as_json, entry, lambda: _show_entry(entry))


@memory.command("update")
@click.argument("memory_id")
@click.option("--content", default=None, help="New content (re-embedded).")
@click.option("--metadata", default=None, help="JSON object merged into the metadata.")
@click.option("--actor", default=None)
@json_option
@click.pass_obj
def memory_update(
    state: _Context,
    memory_id: str,
    content: str | None,
    metadata: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Change a memory's content and/or merge metadata into it."""
    patch = _parse_json(metadata, "metadata", ErrorCode.INVALID_ARGUMENT)
    entry = state.ms().memory.update(memory_id, content=content, metadata=patch, actor=actor)
    _emit(as_json, entry, lambda: _show_entry(entry))


@memory.command("delete")
@click.argument("memory_id")
@click.option("--actor", default=None)
@json_option
@click.pass_obj
def memory_delete(state: _Context, memory_id: str, actor: str | None, as_json: bool) -> None:
    """Delete a memory (succeeds when it is already gone)."""
    result = state.ms().memory.delete(memory_id, actor=actor)
    _emit(
        as_json,
        result,
        lambda: click.echo(f"deleted {memory_id}" if result.existed else f"{memory_id} was absent"),
    )


@memory.command("list")
@identifier_options
@click.option("--layer", "layers", multiple=True, help="Only this layer (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Any of these tags (repeatable).")
@click.option("--filter", "filters", default=None, help="Metadata filter JSON.")
@click.option("--limit", type=int, default=None, help="Page size (default 50).")
@click.option("--cursor", default=None, help="next_cursor of the previous page.")
@json_option
@click.pass_obj
def memory_list(state: _Context, /, **kw: Any) -> None:
    """List memories newest first, one page at a time."""
    as_json = kw.pop("as_json")
    filters = _parse_json(kw.pop("filters"), "filter", ErrorCode.INVALID_FILTER)
    page = state.ms().memory.list(
        layers=list(kw.pop("layers")) or None,
        tags=list(kw.pop("tags")) or None,
        filters=filters,
        limit=kw.pop("limit"),
        cursor=kw.pop("cursor"),
        **_ids(kw),
    )

    def human() -> None:
        for entry in page.items:
            _show_entry(entry)
        click.echo(f"-- {len(page.items)} of {page.total_count}")
        if page.next_cursor:
            click.echo(f"-- next page: --cursor {page.next_cursor}")

    _emit(as_json, page, human)


@memory.command("history")
@click.argument("memory_id")
@json_option
@click.pass_obj
def memory_history(state: _Context, memory_id: str, as_json: bool) -> None:
    """Every add, update and delete of a memory, oldest first."""
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

    _emit(as_json, events, human)


@cli.group()
def hierarchy() -> None:
    """Register which team a project, which org a team, which company an org belongs to."""


@hierarchy.command("register")
@click.option("--project-id", default=None)
@click.option("--team-id", default=None)
@click.option("--org-id", default=None)
@click.option("--company-id", default=None)
@json_option
@click.pass_obj
def hierarchy_register(state: _Context, /, as_json: bool, **ids: str | None) -> None:
    """Register adjacent links: project → team, team → org, org → company."""
    links = state.ms().memory.register_hierarchy(**ids)
    _emit(
        as_json,
        links,
        lambda: _show_links(links),
    )


@hierarchy.command("defaults")
@click.option("--team-id", default=None, help="Team of projects that registered none.")
@click.option("--org-id", default=None, help="Org of teams that registered none.")
@click.option("--company-id", default=None, help="Company of orgs that registered none.")
@json_option
@click.pass_obj
def hierarchy_defaults(state: _Context, /, as_json: bool, **ids: str | None) -> None:
    """Set the tenant-wide parents (without them, parents default to 'default')."""
    links = state.ms().memory.set_hierarchy_defaults(**ids)
    _emit(
        as_json,
        links,
        lambda: _show_links(links),
    )


@hierarchy.command("resolve")
@identifier_options
@json_option
@click.pass_obj
def hierarchy_resolve(state: _Context, /, as_json: bool, **ids: str | None) -> None:
    """Show the identifiers after resolution and the layers they reach."""
    result = state.ms().memory.resolve_identifiers(**ids)

    def human() -> None:
        for name, value in result["identifiers"].items():
            click.echo(f"{name}: {value}")
        click.echo(f"layers: {', '.join(result['layers'])}")

    _emit(as_json, result, human)


@cli.group()
def db() -> None:
    """Schema migrations and moving data between stores."""


@db.command("upgrade")
@json_option
@click.pass_obj
def db_upgrade(state: _Context, as_json: bool) -> None:
    """Apply pending schema migrations to the configured database (also done on start)."""
    ms = state.ms()
    store = ms.settings.store_kind()
    version = getattr(ms.aio.store, "schema_version", None)
    report = {"store": store, "schema_version": version}
    _emit(as_json, report, lambda: click.echo(f"{store} store at schema version {version}"))


@db.command("copy")
@click.option("--from", "source", required=True, help="sqlite:///path/to/lamina.db")
@click.option("--to", "target", required=True, help="postgresql://user@host:port/database")
@json_option
def db_copy(source: str, target: str, as_json: bool) -> None:
    """Copy an embedded store into PostgreSQL (embeddings and history included), verified."""
    import asyncio

    from lamina.config import sqlite_url_path
    from lamina.extras import require

    require("postgres")
    from lamina.store.copy import copy_sqlite_to_postgres

    report = asyncio.run(copy_sqlite_to_postgres(sqlite_url_path(source), target))

    def human() -> None:
        for tenant, counts in report["tenants"].items():
            numbers = ", ".join(f"{table} {n}" for table, n in counts.items())
            click.echo(f"tenant {tenant}: {numbers}")
        click.echo(f"copied {len(report['tenants'])} tenant(s); counts verified")

    _emit(as_json, report, human)


@cli.command("info")
@json_option
@click.pass_obj
def info(state: _Context, as_json: bool) -> None:
    """Where lamina keeps its data and what it is configured with (opens nothing)."""
    import platform
    from importlib.metadata import version

    from lamina.config import load_settings
    from lamina.extras import EXTRAS, installed

    settings = load_settings(
        state.options["config_file"],
        data_dir=state.options["data_dir"],
        database_url=state.options["database_url"],
        tenant_id=state.options["tenant_id"],
    )
    sources = settings.sources
    extras = {extra: installed(extra) for extra in EXTRAS}
    report: dict[str, Any] = {
        "version": version("lamina"),
        "python": platform.python_version(),
        "data_dir": str(settings.data_dir),
        "data_dir_source": sources.get("data_dir", "settings"),
        "config_file": sources.get("config_file") or None,
        "config_file_source": sources.get("config_file_source", "settings"),
        "store": settings.store_kind(),
        "database": settings.database_location(),
        "knowledge_path": str(settings.knowledge_path()),
        "tenant_id": settings.tenant_id,
        "embedding": {
            "provider": settings.embedding.provider,
            "model": settings.embedding.model or "all-MiniLM-L6-v2",
        },
        "extras": extras,
    }

    def human() -> None:
        rows = [
            ("lamina", f"{report['version']} (Python {report['python']})"),
            ("data directory", f"{report['data_dir']}  (from {report['data_dir_source']})"),
            (
                "config file",
                f"{report['config_file']}  (from {report['config_file_source']})"
                if report["config_file"]
                else "none",
            ),
            ("database", f"{report['store']}  {report['database']}"),
            ("knowledge", report["knowledge_path"]),
            ("tenant", report["tenant_id"]),
            ("embedding", f"{settings.embedding.provider} {report['embedding']['model']}"),
            (
                "extras",
                "  ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in extras.items()),
            ),
        ]
        for label, value in rows:
            click.echo(f"{label:<15} {value}")

    _emit(as_json, report, human)


@cli.command("health")
@json_option
@click.pass_obj
def health(state: _Context, as_json: bool) -> None:
    """Check the store and show its capabilities."""
    report = state.ms().health()
    _emit(as_json, report, lambda: click.echo(json.dumps(report, indent=2)))
    if not report["healthy"]:
        sys.exit(1)


@cli.command("demo")
@click.pass_obj
def demo(state: _Context) -> None:
    """Store a few memories and context items in the 'demo' tenant, search them in every
    mode and print the system prompt assembled for a question."""
    ms = state.ms()
    tenant = "demo"
    old = ms.memory.list(user_id="alice", project_id="atlas", limit=1000, tenant_id=tenant)
    ms.memory.bulk_delete([m.id for m in old.items], tenant_id=tenant)
    ms.memory.register_hierarchy(
        project_id="atlas", team_id="platform", org_id="eng", company_id="acme", tenant_id=tenant
    )
    samples = [
        ("Alice prefers dark mode in every editor", "user", {"tags": ["ui"]}),
        ("Alice writes Python and reviews Go code", "user", {"tags": ["languages"]}),
        ("Project Atlas stores its data in PostgreSQL 15", "project", {"tags": ["db"]}),
        ("The platform team deploys on Fridays only after 10:00", "team", {"tags": ["ops"]}),
        ("Acme requires two reviewers for every merge to main", "company", {"tags": ["policy"]}),
    ]
    for content, layer, metadata in samples:
        ms.memory.add(
            content,
            layer=layer,
            user_id="alice",
            project_id="atlas",
            metadata=metadata,
            tenant_id=tenant,
        )
    where = (
        ms.settings.database_url
        if ms.settings.store_kind() == "postgresql"
        else ms.settings.sqlite_path()
    )
    click.echo(f"stored {len(samples)} memories in {where} (tenant 'demo')\n")
    for mode in ("semantic", "keyword", "hybrid"):
        query = "which database does the project use"
        hits = ms.memory.search(
            query,
            user_id="alice",
            project_id="atlas",
            mode=mode,
            tenant_id=tenant,
            threshold=0.3 if mode == "semantic" else None,
        )
        click.echo(f"{mode} search: {query!r}")
        for hit in hits:
            click.echo(f"  {hit.score:.3f}  [{hit.memory.layer.value}] {hit.memory.content}")
    click.echo("\nlayers reached by user alice in project atlas:")
    resolved = ms.memory.resolve_identifiers(user_id="alice", project_id="atlas", tenant_id=tenant)
    click.echo("  " + ", ".join(resolved["layers"]))

    ctx = ms.context
    ctx.knowledge.save(
        "deploy-window",
        "Deploys happen on Fridays only after 10:00",
        category="rule",
        tenant_id=tenant,
    )
    ctx.learnings.save(
        "deploy fails with a migration lock timeout",
        "wait for the nightly vacuum to finish, then retry the deploy",
        category="timeout",
        tenant_id=tenant,
    )
    ctx.skills.save(
        "rollback", "Roll back the last deploy of a service", type="script", tenant_id=tenant
    )
    question = "can I deploy today? last time the deploy hit a migration lock timeout"
    prompt = ctx.build_prompt(
        "You are the release assistant.",
        question,
        identifiers={"user_id": "alice", "project_id": "atlas"},
        tenant_id=tenant,
    )
    click.echo(f"\nsystem prompt assembled for {question!r}:\n")
    click.echo(prompt)

    _demo_knowledge(ms, tenant)


def _demo_knowledge(ms: Lamina, tenant: str) -> None:
    ks = ms.knowledge
    found = ks.list(type="policy", tenant_id=tenant)
    if not found.items:
        ks.create(
            "adr",
            "Use PostgreSQL for every service's data",
            layer="team",
            layer_id="platform",
            summary="One database engine to run, back up and tune.",
            status="accepted",
            author="alice",
            tenant_id=tenant,
        )
        ks.create(
            "policy",
            "Supported HTTP clients",
            layer="company",
            status="accepted",
            mode="mandatory",
            rules=[
                {
                    "id": "no-requests",
                    "target": "dependency",
                    "operator": "must_not_use",
                    "value": "requests",
                    "severity": "block",
                    "message": "use httpx (async, HTTP/2)",
                }
            ],
            author="cto",
            tenant_id=tenant,
        )
    click.echo("\nknowledge search 'which database do we use':")
    for hit in ks.search("which database do we use", limit=2, tenant_id=tenant):
        click.echo(f"  {hit.score:.3f}  {hit.item.id} [{hit.item.scope}] {hit.item.title}")
    head = ks.head(tenant_id=tenant)
    click.echo(f"  (git repository {ks.git.directory(tenant)} at {head[:12] if head else '-'})")
    result = ms.governance.validate(
        "team", {"dependencies": ["requests>=2.32", "httpx==0.28.1"]}, "platform", tenant_id=tenant
    )
    click.echo("governance validate of dependencies requests, httpx at team platform:")
    for v in result.violations:
        click.echo(f"  {v.severity.value}: {v.policy_id}/{v.rule_id}: {v.message}")
    click.echo(f"  valid: {result.is_valid}")


def _fail(error: LaminaError, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"error": error.to_dict()}, ensure_ascii=False, indent=2))
    else:
        click.echo(f"error: {error.code.value}: {error.message}", err=True)
    sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: errors print their code and message, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args
    logging.basicConfig(
        level=os.environ.get("LAMINA_LOG_LEVEL", "WARNING").upper(),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        cli.main(args=args, prog_name="lamina", standalone_mode=False)
    except LaminaError as exc:
        _fail(exc, as_json)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # the last line of defence: no traceback for users
        if os.environ.get("LAMINA_DEBUG"):
            raise
        logging.getLogger("lamina").error("unexpected failure", exc_info=exc)
        _fail(LaminaError(ErrorCode.INTERNAL_ERROR, f"unexpected failure: {exc}"), as_json)


# The context and session commands live in their own modules; they register on ``cli``.
from lamina import cli_context, cli_knowledge, cli_server, cli_sessions  # noqa: E402, F401
