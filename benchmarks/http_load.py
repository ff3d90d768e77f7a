"""A lean HTTP/1.1 client for load generation: one keep-alive connection, one request at a
time, each request written as one buffer and its answer read by its Content-Length.

The load generator shares the cores with the server it measures: httpx spent ~3.5 ms of CPU
on each request, as much as a whole request of the server (measured on 2 cores), and so
slowed the server it measured. This client sends the same bytes httpx sends (the same
headers, the JSON body encoded as httpx encodes it) for a fraction of the CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

#: The headers httpx 0.28 sends with ``client.post(url, json=..., headers=...)``.
_HEADERS = (
    b"Accept: */*\r\nAccept-Encoding: gzip, deflate, zstd\r\nConnection: keep-alive\r\n"
    b"User-Agent: python-httpx/0.28.1\r\n"
)


class Connection:
    """One connection to ``url`` (``http://host:port``); ``post`` sends a request on it
    and returns the status and the body of the answer."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
        self._head = f"POST {{path}} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode() + _HEADERS
        self._extra = extra
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: Any) -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        payload = data.encode()
        self._writer.write(
            self._head.replace(b"{path}", path.encode())
            + self._extra
            + b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(payload)
            + payload
        )
        head = await self._reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            elif name.strip().lower() == b"transfer-encoding":
                raise RuntimeError("a chunked answer: this client reads Content-Length only")
        if length is None:
            raise RuntimeError("an answer without Content-Length")
        return status, await self._reader.readexactly(length)

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
            self._writer = None
