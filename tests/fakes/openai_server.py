"""A fake OpenAI-compatible server on 127.0.0.1 for tests: the real client code talks to it.

It serves POST /v1/embeddings with deterministic vectors (a hash of the text), counts the
texts it embedded, and can be told to fail the next requests with a given status. It also
serves chat: POST /v1/chat/completions (OpenAI) and POST /v1/messages (Anthropic), records
every chat request body, and answers with ``reply(body)`` (default: "echo: <last user text>")
or, first, with the answers ``script(...)`` queued (texts, or Failures for chat requests
only). A Failure can delay (to make the client time out) or send a body that is not what
the API promises.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
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
    delay: float = 0.0


def _echo(body: dict[str, Any]) -> str:
    messages = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return "echo: " + (messages[-1]["content"] if messages else "")


class FakeOpenAI:
    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self.embedded: list[str] = []
        self.requests = 0
        self.failures: list[Failure] = []
        self.auth_headers: list[str | None] = []
        self.chat_requests: list[dict[str, Any]] = []
        self.reply: Callable[[dict[str, Any]], str] = _echo
        self.scripted: list[str | Failure] = []
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
                if self.path in ("/v1/chat/completions", "/v1/messages"):
                    with owner._lock:
                        owner.chat_requests.append(body)
                        if failure is None and owner.scripted:
                            answer = owner.scripted.pop(0)
                            if isinstance(answer, Failure):
                                failure = answer
                            else:
                                body = {**body, "_scripted": answer}
                if failure is not None:
                    if failure.delay:
                        time.sleep(failure.delay)
                    self._reply(failure.status, failure.body, failure.headers)
                    return
                if self.path == "/v1/chat/completions":
                    self._reply(200, json.dumps(owner._completion(body)))
                    return
                if self.path == "/v1/messages":
                    self._reply(200, json.dumps(owner._message(body)))
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
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _answer(self, body: dict[str, Any]) -> str:
        scripted = body.get("_scripted")
        return scripted if isinstance(scripted, str) else self.reply(body)

    def script(self, *answers: str | Failure) -> None:
        """Answer the next chat requests with these, in order, before ``reply``."""
        with self._lock:
            self.scripted.extend(answers)

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        text = self._answer(body)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _message(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": [{"type": "text", "text": self._answer(body)}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    @property
    def root_url(self) -> str:
        """The server root (Anthropic's SDK adds /v1 itself)."""
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

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
