"""A fake OpenAI-compatible server on 127.0.0.1 for tests: the real client code talks to it.

It serves POST /v1/embeddings with deterministic vectors (a hash of the text), counts the
texts it embedded, and can be told to fail the next requests with a given status. It also
serves chat: POST /v1/chat/completions (OpenAI) and POST /v1/messages (Anthropic), records
every chat request body, and answers with ``reply(body)`` (default: "echo: <last user text>")
or, first, with the answers ``script(...)`` queued (texts, or Failures for chat requests
only). ``reply`` may return a Reply instead of text, to answer with tool calls; a request
with ``"stream": true`` is answered as server-sent chunks (OpenAI's streaming format); a
request ``refuse(body)`` is true for gets a 400 "maximum context length exceeded".
A Failure can delay (to make the client time out) or send a body that is not what the API
promises.
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


@dataclass
class Reply:
    """An answer with tool calls: ``calls`` are (name, arguments as a dict)."""

    content: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _echo(body: dict[str, Any]) -> str:
    messages = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = messages[-1]["content"] if messages else ""
    return "echo: " + (content if isinstance(content, str) else json.dumps(content))


class FakeOpenAI:
    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self.embedded: list[str] = []
        self.requests = 0
        self.failures: list[Failure] = []
        self.auth_headers: list[str | None] = []
        self.chat_requests: list[dict[str, Any]] = []
        self.reply: Callable[[dict[str, Any]], str | Reply] = _echo
        self.scripted: list[str | Failure] = []
        #: Chat requests for which this is true are refused as too long (400).
        self.refuse: Callable[[dict[str, Any]], bool] = lambda body: False
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
                if failure is None and self.path != "/v1/embeddings" and owner.refuse(body):
                    failure = Failure(
                        400, body='{"error": {"message": "maximum context length exceeded"}}'
                    )
                if failure is not None:
                    if failure.delay:
                        time.sleep(failure.delay)
                    self._reply(failure.status, failure.body, failure.headers)
                    return
                if self.path == "/v1/chat/completions" and body.get("stream"):
                    self._stream(owner._chunks(body))
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

            def _stream(self, chunks: list[dict[str, Any]]) -> None:
                raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(raw.encode())))
                self.end_headers()
                self.wfile.write(raw.encode())

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

    def _answer(self, body: dict[str, Any]) -> Reply:
        scripted = body.get("_scripted")
        answer = scripted if isinstance(scripted, str) else self.reply(body)
        return answer if isinstance(answer, Reply) else Reply(answer)

    def script(self, *answers: str | Failure) -> None:
        """Answer the next chat requests with these, in order, before ``reply``."""
        with self._lock:
            self.scripted.extend(answers)

    def _chunks(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The answer in OpenAI's streaming shape: text in pieces of 5 characters, each tool
        call's arguments in two pieces."""
        answer = self._answer(body)
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        text = answer.content
        deltas.extend({"content": text[i : i + 5]} for i in range(0, len(text), 5))
        for n, (name, args) in enumerate(answer.calls):
            raw = json.dumps(args)
            half = len(raw) // 2
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": n,
                            "id": f"call_{n}",
                            "type": "function",
                            "function": {"name": name, "arguments": raw[:half]},
                        }
                    ]
                }
            )
            deltas.append({"tool_calls": [{"index": n, "function": {"arguments": raw[half:]}}]})
        finish = "tool_calls" if answer.calls else "stop"
        out = []
        for n, delta in enumerate(deltas):
            last = n == len(deltas) - 1
            out.append(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [
                        {"index": 0, "delta": delta, "finish_reason": finish if last else None}
                    ],
                }
            )
        return out

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._answer(body)
        message: dict[str, Any] = {"role": "assistant", "content": answer.content}
        if answer.calls:
            message["content"] = answer.content or None
            message["tool_calls"] = [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for n, (name, args) in enumerate(answer.calls)
            ]
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if answer.calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _message(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._answer(body)
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": answer.content}] if answer.content or not answer.calls else []
        )
        blocks.extend(
            {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args}
            for n, (name, args) in enumerate(answer.calls)
        )
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": blocks,
            "stop_reason": "tool_use" if answer.calls else "end_turn",
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
