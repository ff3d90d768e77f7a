"""A fake OpenAI-compatible server on 127.0.0.1 for tests: the real client code talks to it.

It serves POST /v1/embeddings with deterministic vectors (a hash of the text), counts the
texts it embedded, and can be told to fail the next requests with a given status.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


def fake_vector(text: str, dims: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(dims)
    return [float(x) for x in vec / np.linalg.norm(vec)]


@dataclass
class Failure:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = '{"error": {"message": "scripted failure"}}'


class FakeOpenAI:
    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self.embedded: list[str] = []
        self.requests = 0
        self.failures: list[Failure] = []
        self.auth_headers: list[str | None] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with owner._lock:
                    owner.requests += 1
                    owner.auth_headers.append(self.headers.get("authorization"))
                    failure = owner.failures.pop(0) if owner.failures else None
                if failure is not None:
                    self._reply(failure.status, failure.body, failure.headers)
                    return
                if self.path != "/v1/embeddings":
                    self._reply(404, '{"error": "not found"}')
                    return
                texts = body["input"]
                dims = int(body.get("dimensions", owner.dims))
                with owner._lock:
                    owner.embedded.extend(texts)
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(t, dims)}
                    for i, t in enumerate(texts)
                ]
                self._reply(
                    200, json.dumps({"object": "list", "data": data, "model": body["model"]})
                )

            def _reply(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                raw = body.encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def fail_next(self, *failures: Failure) -> None:
        with self._lock:
            self.failures.extend(failures)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
