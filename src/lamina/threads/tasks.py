"""A2A tasks, read and written for one tenant: what the server's task store (the SDK's
``TaskStore``) and the inspector's server page use instead of the thread store.

Every call checks the tenant, waits for the start-up (the store opened and migrated), is
counted and retries a transient failure (``calls.py``), as the memory service's calls do;
the one write that is not idempotent (``save_with_thread``: creating a thread whose id must
be new) is not retried.
"""

from __future__ import annotations

from lamina.checks import check_tenant
from lamina.threads.calls import Calls
from lamina.threads.ports import NewThread, StoredTask, ThreadStore


class TaskService:
    """The tasks of the A2A server, per tenant, over the threads port."""

    def __init__(self, store: ThreadStore, calls: Calls) -> None:
        """``calls``: the start-up, retries and metrics of the thread service it serves."""
        self._store = store
        self._calls = calls

    async def save(self, tenant_id: str, task: StoredTask) -> None:
        """Save (or replace) the task (``ThreadStore.save_task``)."""
        tenant = check_tenant(tenant_id)
        await self._calls.run("save_task", lambda: self._store.save_task(tenant, task))

    async def save_with_thread(self, tenant_id: str, task: StoredTask, thread: NewThread) -> None:
        """Create ``thread`` (an id the server just made) and save ``task`` in one
        transaction (``ThreadStore.create_thread``); not retried: a retry after a write that
        did land would find the thread there."""
        tenant = check_tenant(tenant_id)
        await self._calls.run(
            "create_thread", lambda: self._store.create_thread(tenant, thread, task), retried=False
        )

    async def get(self, tenant_id: str, task_id: str) -> StoredTask | None:
        tenant = check_tenant(tenant_id)
        return await self._calls.run("get_task", lambda: self._store.get_task(tenant, task_id))

    async def list(
        self,
        tenant_id: str,
        *,
        limit: int,
        context_id: str | None = None,
        state: int | None = None,
        updated_after_ns: int | None = None,
        before: tuple[int, str] | None = None,
    ) -> tuple[list[StoredTask], int]:
        """One page of the tenant's tasks, newest first, strictly after the cursor
        ``before`` (filters: None for any); and how many match the filters."""
        tenant = check_tenant(tenant_id)
        return await self._calls.run(
            "list_tasks",
            lambda: self._store.list_tasks(
                tenant,
                context_id=context_id,
                state=state,
                updated_after_ns=updated_after_ns,
                before=before,
                limit=limit,
            ),
        )

    async def delete(self, tenant_id: str, task_id: str) -> None:
        tenant = check_tenant(tenant_id)
        await self._calls.run("delete_task", lambda: self._store.delete_task(tenant, task_id))
