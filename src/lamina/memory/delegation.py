"""``Delegate`` lives in ``lamina.delegation`` (memory, knowledge and observational memory
use it); this name stays for those who imported it from here."""

from lamina.delegation import Delegate

__all__ = ["Delegate"]
