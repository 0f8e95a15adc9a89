"""A stand-in for an OpenAI-compatible model: chat completions that report token usage
and answer with tool calls, deterministically, and a log of every call.

    POST /v1/chat/completions   (or /chat/completions) an OpenAI chat completion request;
                                with ``"stream": true``, server-sent events as OpenAI
                                streams them (``stream_chunks``)
    GET  /calls                 every call in arrival order, with its usage:
                                [arrived_at, model, idempotency key, status,
                                 prompt_tokens, completion_tokens]
    POST /faults                as the effect stand-ins (``server``): latency, outage, ...,
                                and ``chunk_delay_ms``, the pause before each streamed chunk
    GET  /health

Budgets are judged by what the model says it used, so the stand-in is the referee: a
test sums its log's tokens per minute, never the agents' own accounts. Its answers
are a function of the request alone, so a replay or a what-if that asks again gets
the same answer, and an agent loop runs the same way every time:

- **With tools**: the next tool the conversation has not called yet, in the order the
  request lists them, with arguments filled from its JSON schema (strings from the
  last user message); once every tool has answered, a final answer naming them.
- **Without**: an answer that quotes the last user message (JSON in JSON mode).

Tokens are counted by ``count_tokens`` (a word, a number or a punctuation mark each):
within a third of what a BPE tokenizer gives for English prose, and the same on every
machine, with no tokenizer file to download. ``max_tokens`` cuts the answer, with
``finish_reason: "length"``, as a real model does. A model is not idempotent: a
repeated ``Idempotency-Key`` is logged, and answered (and counted) again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Any

from standins.server import Faults, JsonHandler

ROUTES = ("/v1/chat/completions", "/chat/completions")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """The stand-in's token count of ``text``."""
    return len(_TOKEN.findall(text))


def prompt_tokens(body: dict[str, Any]) -> int:
    """What a request's prompt costs: its messages' text, tool calls and the tools'
    definitions, plus 3 tokens of framing per message (as OpenAI's own count has)."""
    total = 0
    for message in body.get("messages") or []:
        total += 3 + count_tokens(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            total += count_tokens(json.dumps(call.get("function") or {}, sort_keys=True))
    for tool in body.get("tools") or []:
        total += count_tokens(json.dumps(tool, sort_keys=True))
    return total


@dataclass(frozen=True)
class ModelCall:
    arrived_at: float
    model: str
    key: str
    status: int
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ModelBook:
    calls: list[ModelCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    """Requests taken and not answered yet (a test kills a client while one is out)."""

    def taken(self, change: int) -> None:
        with self.lock:
            self.in_flight += change

    def log(self, call: ModelCall) -> None:
        with self.lock:
            self.calls.append(call)


class RequestError(ValueError):
    """A request that is not a chat completion request (a 400 naming what is wrong)."""


def complete(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion a request gets (without ``id`` and ``created``, which the
    server adds).

    Raises:
        RequestError: no ``model``, no ``messages``, or a malformed tool.
    """
    model = body.get("model")
    messages = body.get("messages")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required: the name of the model to ask")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' is required: a non-empty list of chat messages")
    tools = _tool_functions(body.get("tools") or [])
    called = [
        call["function"]["name"]
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
        if isinstance(call.get("function"), dict)
    ]
    asked = _last_user_text(messages)
    pending = [tool for tool in tools if tool["name"] not in called]
    if pending:
        tool = pending[0]
        conversation = json.dumps(messages, sort_keys=True).encode()
        call_id = "call_" + hashlib.sha256(conversation).hexdigest()[:16]
        arguments = json.dumps(_arguments(tool.get("parameters") or {}, asked), sort_keys=True)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool["name"], "arguments": arguments},
                }
            ],
        }
        finish = "tool_calls"
        completion_tokens = count_tokens(tool["name"]) + count_tokens(arguments)
    else:
        json_mode = (body.get("response_format") or {}).get("type") == "json_object"
        text = _final_answer(asked, called, json_mode=json_mode)
        text, finish = _cut(text, body.get("max_tokens"))
        message = {"role": "assistant", "content": text}
        completion_tokens = count_tokens(text)
    prompt = prompt_tokens(body)
    return {
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    }


_PIECE = re.compile(r"\s*\S+")


def stream_chunks(completion: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects OpenAI streams for ``completion``.

    The first carries the role, then one per word of the content (with the spaces
    before it, so the pieces join back to the text exactly), or one with the whole
    tool calls; the last has the ``finish_reason``; with ``include_usage``
    (``stream_options``) a final chunk with no choices carries the usage.
    """
    head: dict[str, Any] = {k: completion[k] for k in ("id", "created", "model") if k in completion}
    head["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for n, call in enumerate(message.get("tool_calls") or ()):
        chunks.append(chunk({"tool_calls": [{"index": n, **call}]}))
    for piece in _PIECE.findall(message.get("content") or ""):
        chunks.append(chunk({"content": piece}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    return chunks


def _tool_functions(tools: list[Any]) -> list[dict[str, Any]]:
    functions = []
    for n, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            tool.get("type") != "function"
            or not isinstance(function, dict)
            or not function.get("name")
        ):
            raise RequestError(
                f"tools[{n}]: expected {{'type': 'function', 'function': {{'name': ...}}}}"
            )
        functions.append(function)
    return functions


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def _arguments(schema: dict[str, Any], asked: str) -> dict[str, Any]:
    """Values for a tool's required parameters, by type (strings quote the request)."""
    properties = schema.get("properties") or {}
    by_type = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    return {
        name: by_type.get((properties.get(name) or {}).get("type", "string"), asked[:80])
        for name in schema.get("required") or []
    }


def _final_answer(asked: str, called: list[str], *, json_mode: bool) -> str:
    summary = f"Answer to: {asked[:200]}"
    if json_mode:
        return json.dumps({"answer": summary, "tools_used": called}, sort_keys=True)
    used = f" (using {', '.join(called)})" if called else ""
    return summary + used


def _cut(text: str, max_tokens: Any) -> tuple[str, str]:
    if not isinstance(max_tokens, int) or max_tokens <= 0 or count_tokens(text) <= max_tokens:
        return text, "stop"
    kept = [m.group(0) for m in _TOKEN.finditer(text)][:max_tokens]
    return " ".join(kept), "length"


class ModelServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the listen backlog: a hundred streams connect at once

    def __init__(self, address: tuple[str, int], *, name: str = "model") -> None:
        super().__init__(address, _Handler)
        self.name = name
        self.book = ModelBook()
        self.faults = Faults()


class _Handler(JsonHandler):
    server: ModelServer

    def do_GET(self) -> None:
        if self.path == "/health":
            self._reply(HTTPStatus.OK, {"status": "ok", "name": self.server.name})
        elif self.path == "/calls":
            with self.server.book.lock:
                calls = [list(call.__dict__.values()) for call in self.server.book.calls]
            self._reply(HTTPStatus.OK, {"calls": calls})
        else:
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": {"message": f"not JSON: {exc}"}})
            return
        if self.path == "/faults":
            self._reply(*self.server.faults.set(body))
            return
        if self.path not in ROUTES:
            self._reply(HTTPStatus.NOT_FOUND, {"error": {"message": f"no route {self.path}"}})
            return
        self.server.book.taken(1)
        try:
            self._chat(body)
        finally:
            self.server.book.taken(-1)

    def _chat(self, body: dict[str, Any]) -> None:
        arrived_at = time.time()
        key = self.headers.get("Idempotency-Key") or ""
        model = str(body.get("model") or "")
        refused = self.server.faults.refusal("chat", body, self.server.book.lock)
        if refused is not None:
            self.server.book.log(ModelCall(arrived_at, model, key, refused))
            self._reply(refused, {"error": {"message": "injected failure"}})
            return
        try:
            completion = complete(body)
        except RequestError as exc:
            self.server.book.log(ModelCall(arrived_at, model, key, HTTPStatus.BAD_REQUEST))
            self._reply(HTTPStatus.BAD_REQUEST, {"error": {"message": str(exc)}})
            return
        usage = completion["usage"]
        self.server.book.log(
            ModelCall(
                arrived_at,
                model,
                key,
                HTTPStatus.OK,
                usage["prompt_tokens"],
                usage["completion_tokens"],
            )
        )
        created = int(arrived_at)
        answer = {"id": f"chatcmpl-{key or created}", "created": created, **completion}
        if body.get("stream") is True:
            options = body.get("stream_options") or {}
            self._stream(stream_chunks(answer, include_usage=bool(options.get("include_usage"))))
            return
        self._reply(HTTPStatus.OK, answer)

    def _stream(self, chunks: list[dict[str, Any]]) -> None:
        """Server-sent events, one chunk each, then ``data: [DONE]``; the connection
        closes at the end (HTTP/1.0), as the body has no length."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        delay = self.server.faults.chunk_delay_ms / 1000
        try:
            for chunk in chunks:
                if delay:
                    time.sleep(delay)
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client went away mid-stream
            pass


def serve(*, name: str = "model", host: str = "127.0.0.1", port: int = 0) -> ModelServer:
    """Start the stand-in model in a background thread; ``server_address`` has the port."""
    server = ModelServer((host, port), name=name)
    threading.Thread(target=server.serve_forever, name=f"standin-{name}", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the stand-in OpenAI-compatible model.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    server = ModelServer((args.host, args.port))
    print(json.dumps({"name": "model", "port": server.server_address[1]}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
