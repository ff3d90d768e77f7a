"""Where ``all_tools`` was imported from before the tools were declared in one table: every
tool now lives in ``lamina.server.tools`` (the context skill's in ``tools/context.py``)."""

from __future__ import annotations

from lamina.server.tools import all_tools

__all__ = ["all_tools"]
