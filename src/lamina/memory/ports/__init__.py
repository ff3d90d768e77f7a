"""The memory ports (``store``) and the records they speak in (``shapes``), importable from
here as one."""

from __future__ import annotations

from lamina.memory.ports import shapes, store
from lamina.memory.ports.shapes import *  # noqa: F403
from lamina.memory.ports.store import *  # noqa: F403

__all__ = shapes.__all__ + store.__all__
