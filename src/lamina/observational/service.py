"""``ms.sessions``: session messages and observational memory.

Appending a message counts its tokens; when a session's un-observed message tokens reach
``message_token_threshold`` (and observational memory is enabled) the session is queued for
the background observer. Processing a session, under its lease (one observer per session,
across processes), runs the Observer on the un-observed messages, optionally compacts them,
runs the Reflector when observation tokens reach ``observation_token_threshold``, and a
meta-reflection when reflections reach ``reflection_consolidation_threshold``. Every LLM
failure is logged and leaves the data as it was: the next trigger tries again.

The service holds its parts, and each public call is one part's method
(``ms.sessions.append`` is ``ms.sessions.records.append``): what they share (``SessionCore``:
the store, settings, counter, retries, un-observed counts), the session records
(``SessionRecords``: messages, observations, reflections, prompts) and the observer runs
(``ObserverRuns``: observer, reflector, graph extraction, their buffers and chat model).
"""

from __future__ import annotations

from collections.abc import Callable

from lamina.buffer import BackgroundBuffer
from lamina.config import ObservationalMemorySettings
from lamina.delegation import Delegate, Forward
from lamina.llm.base import ChatModel
from lamina.observational.base import Key, SessionCore
from lamina.observational.messages import SessionRecords
from lamina.observational.runs import ObserverRuns, observer_llm_settings

__all__ = ["SessionService", "observer_llm_settings"]


class SessionService:
    """``ms.sessions``: the session records and the observer runs, each call handed to the
    part that holds it."""

    def __init__(
        self, core: SessionCore, model_factory: Callable[[], ChatModel] | None = None
    ) -> None:
        """``core``: what the parts share (the runtime builds it); ``model_factory``: the
        observer's chat model, built when first needed (None: observing raises
        CONFIGURATION_ERROR)."""
        #: What the parts share (the store, settings, counter, retries, un-observed counts).
        self.core = core
        self.runs = ObserverRuns(core, model_factory)
        self.records = SessionRecords(core, self.runs)

    settings = Forward[ObservationalMemorySettings](
        "core", "observational_memory's settings (what every part reads).", settable=True
    )
    buffer = Forward[BackgroundBuffer[Key]]("runs", "Sessions queued for the observer.")
    graph_buffer = Forward[BackgroundBuffer[tuple[str, str, str, str]]](
        "runs", "Feeds graph extraction: (tenant, session, observation id, observation text)."
    )
    graph_enabled = Forward[bool](
        "runs", "Graph memory is on (observational memory and its graph enabled)."
    )

    # -- the session's record (SessionRecords) ----------------------------------------------
    append = Delegate("records", SessionRecords.append)
    append_many = Delegate("records", SessionRecords.append_many)
    messages = Delegate("records", SessionRecords.messages)
    recent_messages = Delegate("records", SessionRecords.recent_messages)
    delete_messages = Delegate("records", SessionRecords.delete_messages)
    system_prompt = Delegate("records", SessionRecords.system_prompt)
    base_prompt = Delegate("records", SessionRecords.base_prompt)
    set_system_prompt = Delegate("records", SessionRecords.set_system_prompt)
    compact = Delegate("records", SessionRecords.compact)
    list_sessions = Delegate("records", SessionRecords.list_sessions)
    show = Delegate("records", SessionRecords.show)
    observations = Delegate("records", SessionRecords.observations)
    reflections = Delegate("records", SessionRecords.reflections)
    delete_observations = Delegate("records", SessionRecords.delete_observations)
    delete_reflections = Delegate("records", SessionRecords.delete_reflections)
    recent_observations = Delegate("records", SessionRecords.recent_observations)
    recent_reflections = Delegate("records", SessionRecords.recent_reflections)

    # -- the observer runs (ObserverRuns) ----------------------------------------------------
    start = Delegate("runs", ObserverRuns.start)
    close = Delegate("runs", ObserverRuns.close)
    dropped_count = Delegate("runs", ObserverRuns.dropped_count)
    graph_dropped_count = Delegate("runs", ObserverRuns.graph_dropped_count)
    flush = Delegate("runs", ObserverRuns.flush)
    observe = Delegate("runs", ObserverRuns.observe)
    reflect = Delegate("runs", ObserverRuns.reflect)
    meta_reflect = Delegate("runs", ObserverRuns.meta_reflect)
    extract_graph = Delegate("runs", ObserverRuns.extract_graph)
    graph_context = Delegate("runs", ObserverRuns.graph_context)
