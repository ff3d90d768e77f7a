"""One memory: its content, metadata, event time, validity and history as a timeline; edit,
invalidate and delete (confirmed first); and delete-all of a scope, with the count shown first."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.checks import invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.models import MemoryEntry
from lamina.server.ui import forms
from lamina.server.ui.base import Inspector, Viewer, redirect
from lamina.server.ui.memories import Browse, held_in


def _missing(memory_id: str) -> LaminaError:
    return LaminaError(
        ErrorCode.MEMORY_NOT_FOUND,
        f"no memory {memory_id!r} in this tenant",
        details={"id": memory_id},
    )


async def _entry(ui: Inspector, viewer: Viewer, memory_id: str) -> MemoryEntry:
    found = await ui.ms.memory.get(memory_id, tenant_id=viewer.tenant)
    if found is None:
        raise _missing(memory_id)
    return found


def _metadata_text(entry: MemoryEntry) -> str:
    return json.dumps(entry.metadata, indent=2, ensure_ascii=False, sort_keys=True)


async def detail(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    memory_id = request.path_params["memory_id"]
    entry = await ui.ms.memory.get(memory_id, tenant_id=viewer.tenant)
    try:
        history = await ui.ms.memory.history(memory_id, tenant_id=viewer.tenant)
    except LaminaError as exc:
        if exc.code is not ErrorCode.MEMORY_NOT_FOUND:
            raise
        history = []
    if entry is None and not history:
        raise _missing(memory_id)
    return ui.render(
        viewer,
        "memory.html",
        section="memories",
        memory_id=memory_id,
        m=entry,
        history=list(reversed(history)),
        metadata=_metadata_text(entry) if entry else "",
        saved=viewer.params.flag("saved"),
        error=None,
    )


async def edit(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    memory_id = request.path_params["memory_id"]
    entry = await _entry(ui, viewer, memory_id)
    params = viewer.params
    content = params.raw("content")
    try:
        given = forms.json_object(params, "metadata") or {}
        # The form holds the whole metadata: keys taken out are removed (None removes).
        patch: dict[str, Any] = {k: None for k in entry.metadata if k not in given}
        patch.update({k: v for k, v in given.items() if entry.metadata.get(k) != v})
        changed_content = content if content.strip() and content != entry.content else None
        if changed_content is None and not patch:
            raise invalid("nothing changed: edit the content or the metadata", "content")
        await ui.ms.memory.update(
            memory_id,
            content=changed_content,
            metadata=patch or None,
            actor=viewer.actor,
            tenant_id=viewer.tenant,
        )
    except LaminaError as exc:
        history = await ui.ms.memory.history(memory_id, tenant_id=viewer.tenant)
        return ui.render(
            viewer,
            "memory.html",
            400,
            section="memories",
            memory_id=memory_id,
            m=entry,
            history=list(reversed(history)),
            metadata=params.raw("metadata"),
            saved=False,
            error=exc,
            typed=content,
        )
    return redirect(f"/memories/{memory_id}?saved=1")


async def invalidate(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    """The fact stopped holding now: ``valid_until`` set, the memory kept."""
    memory_id = request.path_params["memory_id"]
    await _entry(ui, viewer, memory_id)
    await ui.ms.memory.invalidate(memory_id, actor=viewer.actor, tenant_id=viewer.tenant)
    return redirect(f"/memories/{memory_id}?saved=1")


async def confirm_delete(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    entry = await _entry(ui, viewer, request.path_params["memory_id"])
    return ui.render(viewer, "confirm_delete.html", section="memories", m=entry)


async def delete(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    memory_id = request.path_params["memory_id"]
    entry = await _entry(ui, viewer, memory_id)
    await ui.ms.memory.delete(memory_id, actor=viewer.actor, tenant_id=viewer.tenant)
    scope = forms.query(entry.identifiers.items(), layer=entry.layer.value)
    return redirect(f"/memories?{scope}&deleted=1")


def _delete_all_page(
    ui: Inspector,
    viewer: Viewer,
    browse: Browse,
    count: int | None,
    deleted: int | None,
    **figures: Any,
) -> Response:
    return ui.render(
        viewer,
        "delete_all.html",
        section="memories",
        browse=browse,
        params=viewer.params,
        count=count,
        deleted=deleted,
        per_layer=figures.get("per_layer", {}),
        listed=figures.get("listed"),
        valid=figures.get("valid"),
        list_query=forms.query([*browse.ids.items(), *(("layer", x) for x in browse.layers)]),
    )


async def confirm_delete_all(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    """The count first, and what it is made of: per layer, and against the memories list
    (which leaves out invalidated facts unless asked, and expired ones not purged yet)."""
    browse = Browse.of(viewer.params)
    if not browse.ids:
        return _delete_all_page(ui, viewer, browse, None, None)
    memory, tenant = ui.ms.memory, viewer.tenant
    count = await memory.count_all(layers=browse.layers or None, tenant_id=tenant, **browse.ids)
    chosen = set(browse.layers)
    per_layer = {}
    for layer in held_in(browse.ids):
        if not chosen or layer.value in chosen:
            per_layer[layer.value] = await memory.count_all(
                layers=[layer.value], tenant_id=tenant, **browse.ids
            )
    # What the list shows of the same selection (no tags, metadata or time range).
    ids: dict[str, Any] = {**browse.ids, "layers": browse.layers or None, "tenant_id": tenant}
    listed = await memory.list_all(limit=1, include_invalid=True, **ids)
    valid = await memory.list_all(limit=1, **ids)
    return _delete_all_page(
        ui,
        viewer,
        browse,
        count,
        None,
        per_layer=per_layer,
        listed=listed.total_count,
        valid=valid.total_count,
    )


async def delete_all(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    browse = Browse.of(viewer.params)
    deleted = await ui.ms.memory.delete_all(
        layers=browse.layers or None, actor=viewer.actor, tenant_id=viewer.tenant, **browse.ids
    )
    return _delete_all_page(ui, viewer, browse, None, deleted)


def routes(ui: Inspector) -> list[Route]:
    return [
        ui.route("/memories/delete-all", confirm_delete_all),
        ui.route("/memories/delete-all", delete_all, post=True),
        ui.route("/memories/{memory_id}", detail),
        ui.route("/memories/{memory_id}/edit", edit, post=True),
        ui.route("/memories/{memory_id}/invalidate", invalidate, post=True),
        ui.route("/memories/{memory_id}/delete", confirm_delete),
        ui.route("/memories/{memory_id}/delete", delete, post=True),
    ]
