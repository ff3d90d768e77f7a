"""``lamina governance ...``: policies in force at a layer, validation and drift (mirrors
ms.governance)."""

from __future__ import annotations

import sys
from typing import Any

import click

from lamina.cli._common import State, emit, json_option, options, parse_json, read_text
from lamina.errors import ErrorCode, LaminaError

__all__ = ["governance"]


@click.group("governance")
def governance() -> None:
    """Policies in force at a layer, validation and drift."""


_layer_options = options(
    click.option(
        "--layer", default="company", show_default=True, help="company, org, team or project."
    ),
    click.option("--layer-id", default=None, help="The org, team or project id."),
)

_context_options = options(
    click.option("--file", "file_", default=None, help="Validate this file: path and content."),
    click.option("--path", default=None, help="The path to check (file rules)."),
    click.option("--content", default=None, help="The content to check (code rules)."),
    click.option("--dependency", "dependencies", multiple=True, help="A dependency (repeatable)."),
    click.option("--import", "imports", multiple=True, help="An import (repeatable)."),
    click.option("--config-json", default=None, help="Configuration as a JSON object."),
)


def _context(kw: dict[str, Any]) -> dict[str, Any]:
    ctx: dict[str, Any] = {}
    file_ = kw.pop("file_")
    if file_ is not None:
        ctx["path"] = file_
        ctx["content"] = read_text(file_, "file")
    for name in ("path", "content"):
        value = kw.pop(name)
        if value is not None:
            ctx[name] = value
    for name in ("dependencies", "imports"):
        value = list(kw.pop(name))
        if value:
            ctx[name] = value
    config = parse_json(kw.pop("config_json"), "config-json", ErrorCode.INVALID_ARGUMENT)
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
    state: State, /, layer: str, layer_id: str | None, as_json: bool, **kw: Any
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

    emit(as_json, result, human)
    if not result.is_valid:
        sys.exit(3)


@governance.command("drift")
@_layer_options
@click.option("--file", "files", multiple=True, help="A file to check (repeatable).")
@click.option("--contexts-json", default=None, help="A JSON list of context objects.")
@json_option
@click.pass_obj
def governance_drift(
    state: State,
    /,
    layer: str,
    layer_id: str | None,
    files: tuple[str, ...],
    contexts_json: str | None,
    as_json: bool,
) -> None:
    """How far files (or contexts) drift from the layer's policies: a score in [0, 1]."""
    contexts: list[Any] = [{"path": f, "content": read_text(f, "file")} for f in files]
    extra = parse_json(contexts_json, "contexts-json", ErrorCode.INVALID_ARGUMENT)
    if extra is not None:
        if not isinstance(extra, list):
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, "--contexts-json must be a list")
        contexts.extend(extra)
    report = state.ms().governance.drift(layer, contexts, layer_id)

    def human() -> None:
        _show_violations(report.violations)
        counts = ", ".join(f"{n} {s}" for s, n in report.counts.items())
        click.echo(f"drift {report.score:.3f} over {report.contexts} context(s): {counts}")

    emit(as_json, report, human)


@governance.command("policies")
@_layer_options
@json_option
@click.pass_obj
def governance_policies(state: State, /, layer: str, layer_id: str | None, as_json: bool) -> None:
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

    emit(as_json, policies, human)
