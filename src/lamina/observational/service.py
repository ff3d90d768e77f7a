"""``ms.sessions``: session messages and observational memory.

Appending a message counts its tokens; when a session's un-observed message tokens reach
``message_token_threshold`` (and observational memory is enabled) the session is queued for
the background observer. Processing a session, under its lease (one observer per session,
across processes), runs the Observer on the un-observed messages, optionally compacts them,
runs the Reflector when observation tokens reach ``observation_token_threshold``, and a
meta-reflection when reflections reach ``reflection_consolidation_threshold``. Every LLM
failure is logged and leaves the data as it was: the next trigger tries again.
"""

from __future__ import annotations

from lamina.observational.messages import SessionRecords
from lamina.observational.runs import observer_llm_settings

__all__ = ["SessionService", "observer_llm_settings"]


class SessionService(SessionRecords):
    """``ms.sessions``: session records (``messages``) and the observer runs (``runs``)."""
