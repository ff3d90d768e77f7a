"""``lamina demo``: a tour of memories, context, knowledge and governance in the 'demo'
tenant."""

from __future__ import annotations

import click

from lamina.cli._common import State
from lamina.facade import Lamina

__all__ = ["demo"]


@click.command("demo")
@click.pass_obj
def demo(state: State) -> None:
    """Store a few memories and context items in the 'demo' tenant, search them in every
    mode and print the system prompt assembled for a question."""
    ms = state.ms()
    tenant = "demo"
    _demo_memories(ms, tenant)
    _demo_context(ms, tenant)
    _demo_knowledge(ms, tenant)


def _demo_memories(ms: Lamina, tenant: str) -> None:
    """Memories of alice in project atlas at five layers, searched in every mode."""
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
    for mode in ("hybrid", "semantic", "keyword"):
        query = "which database does the project use"
        hits = ms.memory.search(
            query, user_id="alice", project_id="atlas", mode=mode, tenant_id=tenant
        )
        click.echo(f"{mode} search: {query!r}")
        for hit in hits:
            p = hit.parts
            why = " ".join(
                f"{name} {value:.2f}"
                for name, value in (("semantic", p.semantic), ("keyword", p.keyword))
                if value is not None
            )
            click.echo(
                f"  {hit.score:.3f}  [{hit.memory.layer.value}] {hit.memory.content}  ({why})"
            )
        if not hits:
            click.echo(f"  nothing at the default threshold ({hits.below_threshold} below it)")
    click.echo("\nlayers reached by user alice in project atlas:")
    resolved = ms.memory.resolve_identifiers(user_id="alice", project_id="atlas", tenant_id=tenant)
    click.echo("  " + ", ".join(resolved["layers"]))


def _demo_context(ms: Lamina, tenant: str) -> None:
    """A knowledge item, a learning and a skill, and the system prompt they make."""
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
