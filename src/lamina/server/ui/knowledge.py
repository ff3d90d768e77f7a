"""Knowledge and governance: the repository's items by type, layer and status (a page at a
time), one item with its git history and the diff of any of its commits; the policies in
force at a layer (merged from the company down) and a box that validates content against
them."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.checks import invalid
from lamina.governance.models import ValidationContext
from lamina.knowledge.models import (
    KnowledgeLayer,
    KnowledgeRecord,
    KnowledgeStatus,
    KnowledgeType,
)
from lamina.server.ui import forms
from lamina.server.ui.base import Inspector, Viewer

PAGE = 50


async def items(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    params = viewer.params
    status = params.get("status") or "any"
    chosen = {
        "type": params.get("type") or None,
        "layer": params.get("layer") or None,
        "layer_id": params.get("layer_id") or None,
        "status": None if status == "any" else status,
        "tags": forms.tags(params) or None,
    }
    cursor = params.get("cursor") or None
    page = await ui.ms.knowledge.list(
        limit=PAGE,
        cursor=cursor,
        tenant_id=viewer.tenant,
        **chosen,  # type: ignore[arg-type]
    )
    pairs = [(k, params.get(k)) for k in ("type", "layer", "layer_id", "tags")]
    pairs.append(("status", status))
    return ui.render(
        viewer,
        "knowledge.html",
        section="knowledge",
        page=page,
        params=params,
        chosen_status=status,
        types=[t.value for t in KnowledgeType],
        layers=[layer.value for layer in KnowledgeLayer],
        statuses=[s.value for s in KnowledgeStatus],
        cursor=cursor,
        first_query=forms.query(pairs),
        next_query=forms.query(pairs, cursor=page.next_cursor) if page.next_cursor else None,
    )


async def item(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    item_id = request.path_params["item_id"]
    found = await ui.ms.knowledge.get(item_id, history=True, tenant_id=viewer.tenant)
    assert isinstance(found, KnowledgeRecord)
    history = found.history
    to_commit = viewer.params.get("to") or None
    if to_commit is not None and to_commit not in {h.commit for h in history}:
        raise invalid(f"commit {to_commit!r} did not change this item", "to")
    commits = [h.commit for h in history]
    from_commit = None
    if to_commit is not None:
        position = commits.index(to_commit)
        from_commit = commits[position + 1] if position + 1 < len(commits) else None
    diff = None
    if history:
        target = to_commit or commits[0]
        if to_commit is None and len(commits) > 1:
            from_commit = commits[1]
        diff = await ui.ms.knowledge.diff(
            item_id,
            from_commit=from_commit,
            to_commit=target if to_commit else None,
            tenant_id=viewer.tenant,
        )
    return ui.render(
        viewer,
        "knowledge_item.html",
        section="knowledge",
        item=found.item,
        history=history,
        diff=diff,
        diff_lines=_lines(diff.diff) if diff else [],
        shown=to_commit or (commits[0] if commits else None),
    )


def _lines(diff: str) -> list[tuple[str, str]]:
    """Each diff line with its kind (add, del, at, or plain) for colouring."""
    out = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "at"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("@@"):
            kind = "at"
        else:
            kind = ""
        out.append((kind, line))
    return out


def _where(viewer: Viewer) -> tuple[str, str | None]:
    layer = viewer.params.get("layer") or "company"
    layer_id = viewer.params.get("layer_id") or None
    return layer, layer_id


async def governance(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    layer, layer_id = _where(viewer)
    return await _governance_page(ui, viewer, layer, layer_id, None)


async def validate(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    layer, layer_id = _where(viewer)
    params = viewer.params
    ctx = ValidationContext(
        path=params.get("path") or None,
        content=params.raw("content") or None,
        dependencies=[d.strip() for d in params.raw("dependencies").splitlines() if d.strip()],
        imports=[i.strip() for i in params.raw("imports").splitlines() if i.strip()],
        config=forms.json_object(params, "config") or {},
    )
    result = await ui.ms.governance.validate(layer, ctx, layer_id, tenant_id=viewer.tenant)
    return await _governance_page(ui, viewer, layer, layer_id, result)


async def _governance_page(
    ui: Inspector, viewer: Viewer, layer: str, layer_id: str | None, result: Any
) -> Response:
    policies = await ui.ms.governance.policies(layer, layer_id, tenant_id=viewer.tenant)
    # The knowledge items that define them (their pages show who changed what, and when).
    found = await ui.ms.knowledge.list(
        type="policy", status=None, limit=ui.ms.settings.memory.max_limit, tenant_id=viewer.tenant
    )
    defined_by: dict[str, list[Any]] = {}
    for item in found.items:
        defined_by.setdefault(item.policy_id or item.id, []).append(item)
    return ui.render(
        viewer,
        "governance.html",
        section="governance",
        layer=layer,
        layer_id=layer_id or "",
        layers=[x.value for x in KnowledgeLayer],
        policies=policies,
        defined_by=defined_by,
        result=result,
        params=viewer.params,
    )


def routes(ui: Inspector) -> list[Route]:
    return [
        ui.route("/knowledge", items),
        ui.route("/knowledge/{item_id}", item),
        ui.route("/governance", governance),
        ui.route("/governance/validate", validate, post=True),
    ]
