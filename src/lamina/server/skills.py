"""The skills runtime: how one request to the tools is handled (the dispatcher, over the
tools of a ``lamina.server.tools.registry.ToolRegistry``). Protocol adapters (A2A, MCP)
translate their messages into ``Call`` and the ``Outcome`` back; nothing here knows a
protocol.

A request is either a direct tool call (no LLM) or free text. Free text goes to the LLM router
when one is configured; otherwise it becomes a read-only search across memory and knowledge.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from lamina.errors import ErrorCode, LaminaError
from lamina.governance.builtin import redact_json
from lamina.metrics import ServerMetrics
from lamina.runtime import AsyncLamina
from lamina.server.router import LLMRouter
from lamina.server.session import relevant_memories, session_context
from lamina.server.tools import MissingArguments
from lamina.server.tools.registry import ToolRegistry
from lamina.threads.ports import NewThread
from lamina.threads.service import IDENTIFIERS, Thread, ThreadService

log = logging.getLogger("lamina.server")

State = Literal["completed", "input-required", "rejected", "failed"]

#: What each error code makes of a task: the caller's mistakes are rejected (fix the request),
#: the server's or a provider's trouble fails it. THREAD_EXPIRED, UNAUTHORIZED, RATE_LIMITED
#: and PAYLOAD_TOO_LARGE are answered before a task exists (protocol error, 401, 429, 413);
#: listed here for the tools that raise them themselves.
TASK_STATE_OF: dict[ErrorCode, State] = {
    ErrorCode.MISSING_IDENTIFIER: "rejected",
    ErrorCode.INVALID_LAYER: "rejected",
    ErrorCode.INVALID_FILTER: "rejected",
    ErrorCode.INVALID_ARGUMENT: "rejected",
    ErrorCode.CONTENT_TOO_LONG: "rejected",
    ErrorCode.QUERY_TOO_LONG: "rejected",
    ErrorCode.MEMORY_NOT_FOUND: "rejected",
    ErrorCode.ITEM_NOT_FOUND: "rejected",
    ErrorCode.ITEM_EXISTS: "rejected",
    ErrorCode.INVALID_TRANSITION: "rejected",
    ErrorCode.INVALID_FRONT_MATTER: "rejected",
    ErrorCode.POLICY_VIOLATION: "rejected",
    ErrorCode.UNKNOWN_TOOL: "rejected",
    ErrorCode.THREAD_EXPIRED: "rejected",
    ErrorCode.THREAD_STATE_TOO_LARGE: "rejected",
    ErrorCode.PAYLOAD_TOO_LARGE: "rejected",
    ErrorCode.UNAUTHORIZED: "rejected",
    ErrorCode.REPOSITORY_ERROR: "failed",
    ErrorCode.CONFLICT: "failed",
    ErrorCode.EMBEDDING_FAILED: "failed",
    ErrorCode.PROVIDER_ERROR: "failed",
    ErrorCode.RATE_LIMITED: "failed",
    ErrorCode.CONFIGURATION_ERROR: "failed",
    ErrorCode.INTERNAL_ERROR: "failed",
}

SEARCH_NOTE = (
    "No LLM router is configured: the text ran as a read-only search across memory and "
    'knowledge. To run a tool, send a data part {"tool": "<name>", "arguments": {...}}.'
)


@dataclass(frozen=True)
class Call:
    """One request: a tool call (``tool`` set) or free ``text``."""

    tenant: str
    thread_id: str
    task_id: str
    tool: str | None = None
    arguments: Mapping[str, Any] | None = None
    text: str = ""
    #: Identifiers the client gave with the message (metadata); the thread keeps them.
    identifiers: Mapping[str, str] = field(default_factory=dict)
    #: The client asked for the session context (metadata ``session_context: true``).
    session: bool = False


@dataclass
class Outcome:
    state: State
    skill: str
    tool: str | None = None
    result: Any = None
    message: str = ""
    error: dict[str, Any] | None = None
    #: Set on a thread's first request.
    session_context: dict[str, Any] | None = None
    #: A thread not stored yet (``ThreadService.fresh``): what creates it with this call's
    #: record, for the caller to write with the call's task (None: its record did not fit).
    new_thread: NewThread | None = None


def _clean_identifiers(given: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in IDENTIFIERS:
        value = given.get(key)
        if isinstance(value, str) and value.strip():
            out[key] = value.strip()
    return out


@dataclass(eq=False)
class Dispatcher:
    """Runs the skill calls of one server: its runtime, tools, threads, metrics, router."""

    ms: AsyncLamina
    registry: ToolRegistry
    threads: ThreadService
    metrics: ServerMetrics
    router: LLMRouter | None = None

    async def open_thread(self, tenant: str, thread_id: str) -> Thread:
        return await self.threads.open(tenant, thread_id)

    async def handle(self, call: Call, thread: Thread | None = None) -> Outcome:
        started = time.perf_counter()
        skill = self.registry.skill_of(call.tool) if call.tool else "search"
        try:
            outcome = await self._handle(call, thread)
        except LaminaError as exc:
            outcome = self.error_outcome(skill, call.tool, exc)
        except Exception:
            log.exception(
                "unexpected error in %s (tenant %s, thread %s, task %s)",
                call.tool or "text",
                call.tenant,
                call.thread_id,
                call.task_id,
            )
            outcome = self.error_outcome(
                skill,
                call.tool,
                LaminaError(ErrorCode.INTERNAL_ERROR, "internal error (see the server log)"),
            )
        self.metrics.requests.labels(outcome.skill, outcome.tool or "-", outcome.state).inc()
        self.metrics.latency.labels(outcome.skill).observe(time.perf_counter() - started)
        return outcome

    def error_outcome(self, skill: str, tool: str | None, exc: LaminaError) -> Outcome:
        if exc.code is ErrorCode.INTERNAL_ERROR:
            exc = LaminaError(ErrorCode.INTERNAL_ERROR, "internal error (see the server log)")
        self.metrics.errors.labels(skill, exc.code.value).inc()
        state = TASK_STATE_OF.get(exc.code, "failed")
        return Outcome(
            state, skill, tool, message=f"{exc.code.value}: {exc.message}", error=exc.to_dict()
        )

    async def _handle(self, call: Call, thread: Thread | None) -> Outcome:
        if thread is None:
            thread = await self.threads.open(call.tenant, call.thread_id)
        given = {**_clean_identifiers(call.arguments or {}), **_clean_identifiers(call.identifiers)}
        identifiers = {**thread.identifiers, **given}
        session: dict[str, Any] | None = None
        # A conversation (free text) starts with its session context; a tool call only when
        # it asks: one-shot calls do only the work they need.
        if thread.new and (call.tool is None or call.session):
            query = call.text or str((call.arguments or {}).get("query") or "")
            session = await session_context(
                self.ms,
                call.tenant,
                identifiers,
                query,
                limit=self.ms.settings.server.session_memories,
            )
        pending = thread.conversation_context.get("pending", {}).get(call.task_id)
        tool_name, arguments = call.tool, dict(call.arguments or {})
        if tool_name is None and pending is not None:
            tool_name = pending["tool"]  # a follow-up answering input-required
        if pending is not None and pending.get("tool") == tool_name:
            arguments = {**pending.get("arguments", {}), **arguments}
        try:
            if tool_name is None:
                outcome = await self._text(call, thread, identifiers)
            else:
                outcome = await self._tool(call, thread, tool_name, arguments, identifiers)
        except LaminaError as exc:
            skill = self.registry.skill_of(tool_name) if tool_name else "search"
            outcome = self.error_outcome(skill, tool_name, exc)
        outcome.session_context = session
        await self._remember(call, thread, outcome, identifiers, arguments, session)
        return outcome

    async def _tool(
        self,
        call: Call,
        thread: Thread,
        name: str,
        arguments: dict[str, Any],
        identifiers: Mapping[str, str],
    ) -> Outcome:
        tool = self.registry.get(name)
        fields = tool.model.model_fields
        for key, value in identifiers.items():
            if key in fields and arguments.get(key) is None:
                arguments[key] = value

        def admit(_: BaseModel) -> None:  # the thread has room for the call's record
            self.threads.check_fits(
                thread,
                lambda c: c.setdefault("turns", []).append(
                    self._turn(call.task_id, name, arguments, "")
                ),
            )

        try:
            result = await tool.run(arguments, call.tenant, admit=admit)
        except MissingArguments as exc:
            missing = exc.details["missing"]
            self.metrics.errors.labels(tool.skill, "INPUT_REQUIRED").inc()
            return Outcome(
                "input-required",
                tool.skill,
                name,
                message=f"{name} needs: {', '.join(missing)}. Reply in this task with a "
                "data part holding the missing arguments.",
                error=exc.to_dict(),
            )
        return Outcome("completed", tool.skill, name, result=result, message=f"{name}: done")

    async def _text(self, call: Call, thread: Thread, identifiers: Mapping[str, str]) -> Outcome:
        text = call.text.strip()
        if not text:
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                'the message has neither text nor a data part {"tool": ..., "arguments": ...}',
            )
        if self.router is not None:
            try:
                route = await self.router.route(text)
            except LaminaError as exc:
                log.warning("LLM router failed (%s): falling back to search", exc)
            else:
                if route.tool is None:
                    return Outcome(
                        "completed",
                        "router",
                        None,
                        result={"reply": route.reply},
                        message=route.reply or "no tool fits this request",
                    )
                return await self._tool(
                    call, thread, route.tool, dict(route.arguments), identifiers
                )
        return await self._search(call, text, identifiers)

    async def _search(self, call: Call, text: str, identifiers: Mapping[str, str]) -> Outcome:
        query = text[: self.ms.settings.memory.max_query_length]
        memories: list[dict[str, Any]] = []
        note = SEARCH_NOTE
        if identifiers:
            memories = await relevant_memories(self.ms, call.tenant, identifiers, query, 5)
        else:
            note += " Memories were not searched: give user_id, project_id, ... in the message "
            note += "metadata."
        found = await self.ms.knowledge.search(query, limit=5, tenant_id=call.tenant)
        knowledge = [
            {
                "id": h.item.id,
                "type": h.item.type.value,
                "title": h.item.title,
                "summary": h.item.summary,
                "score": round(h.score, 4),
            }
            for h in found
        ]
        return Outcome(
            "completed",
            "search",
            None,
            result={"mode": "search", "note": note, "memories": memories, "knowledge": knowledge},
            message=note,
        )

    @staticmethod
    def _turn(
        task_id: str, tool: str | None, arguments: Mapping[str, Any], result: str
    ) -> dict[str, Any]:
        """A record of one call for the thread: no secret in its arguments (redacted); its
        task's id, by which forgetting finds it (lamina.threads.forgetting) and where its
        result is (``result`` holds only the state the call ended in)."""
        return {
            "at": round(time.time(), 3),
            "task": task_id,
            "tool": tool,
            "arguments": redact_json(dict(arguments)),
            "result": result,
        }

    async def _remember(
        self,
        call: Call,
        thread: Thread,
        outcome: Outcome,
        identifiers: Mapping[str, str],
        arguments: Mapping[str, Any],
        session: dict[str, Any] | None,
    ) -> None:
        def change(context: dict[str, Any]) -> None:
            context["identifiers"] = dict(identifiers)
            if session is not None:
                context["session_context"] = session
            pending = context.setdefault("pending", {})
            if outcome.state == "input-required":
                pending[call.task_id] = {"tool": outcome.tool, "arguments": dict(arguments)}
            else:
                pending.pop(call.task_id, None)
                # The result is kept once, in the task (GetTask): the turn names it and its
                # state.
                context.setdefault("turns", []).append(
                    self._turn(
                        call.task_id,
                        outcome.tool,
                        arguments if outcome.tool else {"text": call.text},
                        f"[{outcome.state}]",
                    )
                )

        try:
            if thread.stored:
                await self.threads.update(call.tenant, call.thread_id, change, thread)
            else:
                outcome.new_thread = self.threads.first_write(thread, change)
        except LaminaError as exc:
            if exc.code is not ErrorCode.THREAD_STATE_TOO_LARGE:
                raise
            # The tool ran; its record does not fit. Say so rather than hide it.
            outcome.message += f" (not remembered in the thread: {exc.message})"
