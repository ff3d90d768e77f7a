"""The SDK's log records of requests a client got wrong, at the level they deserve."""

from __future__ import annotations

import logging


class ClientFaults(logging.Filter):
    """The SDK logs a JSON-RPC request it cannot read at ERROR with a traceback, though it is
    the client's mistake (answered -32600 or -32602): one warning line instead."""

    MESSAGES = frozenset(
        {
            "Failed to validate base JSON-RPC request",
            "Failed to validate base JSON-RPC request for v0.3",
            "Failed to parse request params",
        }
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in self.MESSAGES and record.exc_info:
            record.msg = f"{record.msg}: {str(record.exc_info[1])[:300]}"
            record.args = ()
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


def quiet_client_faults() -> None:
    """Install ``ClientFaults`` on the SDK's JSON-RPC loggers (once)."""
    for name in ("a2a.server.routes.jsonrpc_dispatcher", "a2a.compat.v0_3.jsonrpc_adapter"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, ClientFaults) for f in logger.filters):
            logger.addFilter(ClientFaults())
