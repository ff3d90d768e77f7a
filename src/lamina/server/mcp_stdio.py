"""``lamina mcp`` over stdio answers the client's ``initialize`` before the mcp SDK is even
imported (issue 35: importing the SDK's protocol types takes most of a second).

The first line on stdin, when it is a well-formed ``initialize`` request, is answered here
with the very bytes the SDK would write (the handshake versions and the result's shape of
the mcp release in ``SDK_RELEASES``; tests/server/test_mcp_handshake.py holds the two
answers equal). Every line, that one included, is then handed to the SDK once it is
loaded, as its stdio transport would have read it; its own answer to that ``initialize``
is dropped (the client has it). Anything else, another mcp release, or Windows: the SDK's
own transport serves, as before. Imports no mcp module."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import suppress
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lamina.config import Settings
    from lamina.server.defaults import IdentifierDefaults

__all__ = ["HANDSHAKE_VERSIONS", "SDK_RELEASES", "Handshake", "run_mcp"]

logger = logging.getLogger(__name__)

#: The protocol versions the SDK negotiates through ``initialize``, oldest first (the last
#: answers a version it does not know): mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: The releases of the SDK's distributions whose ``initialize`` answer is the one built here.
SDK_RELEASES = {"mcp": ("2.3.0",), "mcp-types": ("2.3.0",)}
#: The keys a client's ``clientInfo`` may have (mcp_types Implementation), all strings.
_CLIENT_INFO = {"name", "version", "title", "description", "websiteUrl"}


def _sdk_matches() -> bool:
    try:
        return all(version(name) in releases for name, releases in SDK_RELEASES.items())
    except PackageNotFoundError:
        return False


def _plain_initialize(message: Any) -> bool:
    """Whether ``message`` is an ``initialize`` request the SDK accepts as it is: its id an
    integer or a string, its params a protocol version, capabilities (objects), and the
    client's name and version (strings); no ``_meta``. Anything else the SDK answers."""
    if not isinstance(message, dict) or set(message) != {"jsonrpc", "id", "method", "params"}:
        return False
    ident, params = message["id"], message["params"]
    if message["jsonrpc"] != "2.0" or message["method"] != "initialize":
        return False
    if isinstance(ident, bool) or not isinstance(ident, int | str) or not isinstance(params, dict):
        return False
    if set(params) != {"protocolVersion", "capabilities", "clientInfo"}:
        return False
    capabilities, client = params["capabilities"], params["clientInfo"]
    return (
        isinstance(params["protocolVersion"], str)
        and _plain_capabilities(capabilities)
        and isinstance(client, dict)
        and {"name", "version"} <= set(client) <= _CLIENT_INFO
        and all(isinstance(value, str) for value in client.values())
    )


#: Capabilities whose values the SDK takes as given (objects of anything).
_OPEN_CAPABILITIES = {"experimental", "extensions"}
#: Capabilities answered here only with these members, each an empty object.
_EMPTY_MEMBERS = {"sampling": {"context", "tools"}, "elicitation": {"form", "url"}}


def _plain_capabilities(capabilities: Any) -> bool:
    """Whether the SDK accepts ``capabilities`` as they are, judged conservatively: roots
    with at most a boolean ``listChanged``, sampling and elicitation with empty members,
    experimental and extensions of objects. Any other shape (``tasks``, a member with
    content, a key the SDK may not know) is left to the SDK to answer."""
    if not isinstance(capabilities, dict):
        return False
    for name, value in capabilities.items():
        if not isinstance(value, dict):
            return False
        if name in _OPEN_CAPABILITIES:
            if not all(isinstance(member, dict) for member in value.values()):
                return False
        elif name == "roots":
            if not set(value) <= {"listChanged"} or not all(
                isinstance(member, bool) for member in value.values()
            ):
                return False
        elif name in _EMPTY_MEMBERS:
            if not set(value) <= _EMPTY_MEMBERS[name] or any(value.values()):
                return False
        else:
            return False
    return True


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class Handshake:
    """The SDK's answer to a plain ``initialize`` request: lamina's name and version, these
    instructions, the tools capability, the version the client asked for when the SDK
    negotiates it (else the latest)."""

    def __init__(self, instructions: str, server_version: str) -> None:
        self.instructions = instructions
        self.server_version = server_version

    def answer(self, line: str) -> tuple[str, int | str] | None:
        """The line to write back to ``line`` and the request's id; None when ``line`` is
        not a plain ``initialize`` request."""
        try:
            # NaN and Infinity are Python's, not JSON's: the SDK refuses such a line.
            message = json.loads(line, parse_constant=_refuse_constant)
            # Nor does it take a lone surrogate (an escaped one parses here).
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        except ValueError:  # UnicodeEncodeError included
            return None
        if not _plain_initialize(message):
            return None
        requested = message["params"]["protocolVersion"]
        negotiated = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        result = {
            "capabilities": {"tools": {"listChanged": False}},
            "instructions": self.instructions,
            "protocolVersion": negotiated,
            "serverInfo": {"name": "lamina", "version": self.server_version},
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        text = json.dumps(reply, ensure_ascii=False, separators=(",", ":"))
        return text + "\n", message["id"]


class Wire:
    """The stdio transport's two ends, claimed as the SDK claims them (fd 0 then reads the
    null device, fd 1 writes to stderr: stray output misses the protocol): a thread reads
    the client's lines, answers a first plain ``initialize`` at once, and keeps every line
    for the SDK, which reads them through ``lines()`` and writes through ``output()``."""

    def __init__(self, handshake: Handshake) -> None:
        import fcntl

        self._handshake = handshake
        self._fds = {fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (0, 1)}
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self._in = io.TextIOWrapper(
            os.fdopen(self._fds[0], "rb", closefd=False), encoding="utf-8", errors="replace"
        )
        self._out = os.fdopen(self._fds[1], "wb", closefd=False)
        # Reading never waits for a write (a client blocked writing to a server blocked
        # writing to it would wait forever): the lines kept and the writes have a lock each.
        self._lock = threading.Lock()  # the lines kept, the loop reading them
        self._writing = threading.Lock()  # the writes, the initialize answered here
        self._kept: deque[str | None] = deque()
        # At most this many lines read and not yet taken by the SDK: a client writing
        # faster than the server answers waits, as with the SDK's own transport.
        self._room = threading.Semaphore(64)
        self._queue: asyncio.Queue[str | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answered: list[int | str] = []  # the initialize answered here, until dropped
        threading.Thread(target=self._read, name="lamina-mcp-stdin", daemon=True).start()

    def close(self) -> None:
        """Give fds 0 and 1 back their ends of the wire."""
        for fd, wire in self._fds.items():
            os.dup2(wire, fd)

    def _read(self) -> None:
        first = True
        with suppress(OSError, ValueError):  # the wire closed under the reader
            for line in self._in:
                if first:
                    first = False
                    self._answer(line)
                self._room.acquire()
                self._keep(line)
        self._keep(None)

    def _answer(self, line: str) -> None:
        """Answer ``line`` if it is a plain initialize; the SDK reads it only afterwards (and
        answers it itself if anything here fails)."""
        try:
            answer = self._handshake.answer(line)
        except Exception:
            logger.exception("answering the first initialize early failed; the SDK answers it")
            return
        if answer is not None:
            with self._writing:
                self._out.write(answer[0].encode("utf-8"))
                self._out.flush()
                self._answered.append(answer[1])

    def _keep(self, line: str | None) -> None:
        with self._lock:
            if self._queue is None or self._loop is None:
                self._kept.append(line)
                return
            loop, queue = self._loop, self._queue
        with suppress(RuntimeError):  # the loop is closed: nobody reads any more
            loop.call_soon_threadsafe(queue.put_nowait, line)

    async def lines(self) -> AsyncIterator[str]:
        """Every line the client wrote, the first ones kept until now, then as they come."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        with self._lock:
            self._loop, self._queue = asyncio.get_running_loop(), queue
            while self._kept:
                queue.put_nowait(self._kept.popleft())
        while (line := await queue.get()) is not None:
            self._room.release()
            yield line

    def output(self) -> Output:
        return Output(self)

    def write(self, text: str) -> None:
        """Write one message of the SDK, unless it answers the initialize answered here."""
        with self._writing:
            if self._answered and self._drops(text):
                return
            self._out.write(text.encode("utf-8"))
            self._out.flush()

    def _drops(self, text: str) -> bool:
        try:
            message = json.loads(text)
        except ValueError:
            return False
        if not isinstance(message, dict) or "id" not in message or "method" in message:
            return False
        ident = self._answered[0]
        if type(message["id"]) is not type(ident) or message["id"] != ident:
            return False
        self._answered.clear()
        if "error" in message:  # the client holds a success: its next calls will say
            logger.warning("the mcp SDK refused the initialize answered: %s", message["error"])
        return True


class Output:
    """What the SDK's stdio transport writes to (an async text file's write and flush)."""

    def __init__(self, wire: Wire) -> None:
        self._wire = wire

    async def write(self, text: str) -> None:
        await asyncio.to_thread(self._wire.write, text)

    async def flush(self) -> None:
        """Each write is flushed."""


def _wire(defaults: IdentifierDefaults) -> Wire | None:
    """The wire that answers initialize here, or None where the SDK's transport must
    serve (Windows, other standard streams than fds 0 and 1, another mcp release)."""
    if sys.platform == "win32" or not _sdk_matches():
        return None
    for fd, stream in ((0, sys.stdin), (1, sys.stdout)):
        try:
            if stream is None or stream.fileno() != fd:
                return None
        except (AttributeError, OSError, ValueError):
            return None
    from lamina import __version__
    from lamina.server.defaults import instructions

    sys.stdout.flush()
    return Wire(Handshake(instructions(defaults), __version__))


async def run_mcp(settings: Settings, transport: str) -> None:
    """Serve MCP over ``transport``: over stdio ``initialize`` answered here when it can
    be, the SDK loaded meanwhile (lamina.server.mcp_server does the rest)."""
    from lamina.server.defaults import IdentifierDefaults

    defaults = IdentifierDefaults(settings.mcp.identifiers())  # bad values fail before start
    if transport != "stdio":
        from lamina.server.mcp_server import serve_http

        await serve_http(settings, defaults)
        return
    wire = _wire(defaults)
    try:
        from lamina.server.mcp_server import serve_stdio

        if wire is None:
            await serve_stdio(settings, defaults)
        else:
            await serve_stdio(settings, defaults, stdin=wire.lines(), stdout=wire.output())
    finally:
        if wire is not None:
            wire.close()
