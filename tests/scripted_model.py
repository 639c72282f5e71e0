"""A scripted OpenAI-compatible chat-completions server on a loopback port, for tests and benchmarks.

    with ScriptedModel(["hello", {"tool_calls": [{"name": "memory", "arguments": {...}}]}]) as model:
        engine = OpenAIEngine(profile="p", base_url=model.base_url, model="m", api_key=None)
        ...
        model.requests  # the JSON bodies received, in order

A script is a list of replies consumed in order (or a callable `script(request_body) -> reply`; a list
item may itself be such a callable). A reply is:

- a string: the final text;
- a dict with any of: "content" (text), "tool_calls" ([{"name", "arguments": dict or JSON text,
  "id"?}], an "id" of None sends no id), "status" + "body" (an HTTP error; body str or JSON value),
  "raw" (a body sent verbatim with status 200), "delay" (seconds before answering),
  "chunk_delay" (seconds between stream events), "content_type" (overrides the header of "raw"),
  "drop" (True: close the connection after reading the request, without answering), "usage" (the
  call's `{"prompt_tokens", "completion_tokens"}`: in the body, or in a last chunk of its own when the
  request's stream_options ask for it, as OpenAI sends it).

Once the script is exhausted every request is answered with the text "(script exhausted)".
`stream=None` answers with an event stream when the request asks for one, True/False force a shape.
`close_after_stream=True` closes the connection right after each event stream, keep-alive headers and
all, as llama.cpp's server does: a client that reuses the pooled connection writes into a closed socket.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Reply = str | dict[str, Any]
ReplyFn = Callable[[Any], Reply]
EXHAUSTED = "(script exhausted)"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedModel

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client closing its kept-alive connection
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output quiet

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.rstrip("/") == "/v1/models":
            if owner.api_key is not None and self.headers.get("Authorization") != f"Bearer {owner.api_key}":
                self._send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                return
            model = owner.model
            self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "scripted"}]})
        else:
            self._send(404, {"error": {"message": f"no route for GET {self.path}"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route for POST {self.path}"}})
            return
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        owner = self.server.owner
        try:
            reply = owner._next_reply(body, dict(self.headers.items()))
            self._answer(_normalize(reply), body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:
            self._send(500, {"error": {"message": f"scripted model failed: {exc!r}"}})

    def _answer(self, spec: dict[str, Any], body: Any) -> None:
        owner = self.server.owner
        if owner._wait(float(spec.get("delay") or 0)):
            self.close_connection = True
            return
        stream = owner.stream if owner.stream is not None else isinstance(body, dict) and bool(body.get("stream"))
        if spec.get("drop"):
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        elif "status" in spec:
            error = spec.get("body", {"error": {"message": "scripted error", "type": "server_error"}})
            self._send(int(spec["status"]), error)
        elif "raw" in spec:
            default_type = "text/event-stream" if stream else "application/json"
            self._send(200, str(spec["raw"]), spec.get("content_type", default_type))
        elif stream:
            owner.shapes.append("sse")
            self._stream(spec, body)
        else:
            owner.shapes.append("json")
            message: dict[str, Any] = {"role": "assistant", "content": spec["content"] if spec["content"] else None}
            if spec["tool_calls"]:
                message["tool_calls"] = [_wire_call(call, call["arguments"]) for call in spec["tool_calls"]]
            answer = _envelope("chat.completion", body, message=message, finish=_finish(spec))
            if spec.get("usage"):
                answer["usage"] = spec["usage"]
            self._send(200, answer)

    def _stream(self, spec: dict[str, Any], body: Any) -> None:
        owner = self.server.owner
        size = max(1, owner.chunk_size)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        text = spec["content"]
        events += [{"content": text[i : i + size]} for i in range(0, len(text), size)]
        for index, call in enumerate(spec["tool_calls"]):
            events.append({"tool_calls": [{"index": index, **_wire_call(call, "")}]})
            args = call["arguments"]
            for i in range(0, len(args), size):
                events.append({"tool_calls": [{"index": index, "function": {"arguments": args[i : i + size]}}]})
        chunk_delay = float(spec.get("chunk_delay") or 0)
        for delta in events:
            self._chunk(_sse(_envelope("chat.completion.chunk", body, delta=delta)))
            if owner._wait(chunk_delay):
                self.close_connection = True
                return
        self._chunk(_sse(_envelope("chat.completion.chunk", body, delta={}, finish=_finish(spec))))
        asked = isinstance(body, dict) and (body.get("stream_options") or {}).get("include_usage")
        if spec.get("usage") and asked:
            last = {**_envelope("chat.completion.chunk", body, delta={}), "choices": [], "usage": spec["usage"]}
            self._chunk(_sse(last))
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")
        if owner.close_after_stream:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_WR)  # the FIN follows the last chunk at once

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, status: int, payload: Any, content_type: str | None = None) -> None:
        if isinstance(payload, str):
            data, content_type = payload.encode(), content_type or "text/plain; charset=utf-8"
        else:
            data, content_type = json.dumps(payload).encode(), content_type or "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _normalize(reply: Reply) -> dict[str, Any]:
    spec: dict[str, Any] = {"content": reply} if isinstance(reply, str) else dict(reply)
    spec["content"] = str(spec.get("content") or "")
    calls = []
    for call in spec.get("tool_calls") or []:
        args = call.get("arguments", {})
        call_id = call["id"] if "id" in call else f"call_{uuid.uuid4().hex[:12]}"
        calls.append(
            {"id": call_id, "name": call["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}
        )
    spec["tool_calls"] = calls
    return spec


def _wire_call(call: dict[str, Any], arguments: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "function": {"name": call["name"], "arguments": arguments}}
    if call["id"] is not None:
        out["id"] = call["id"]
    return out


def _finish(spec: dict[str, Any]) -> str:
    return "tool_calls" if spec["tool_calls"] else "stop"


def _envelope(
    kind: str, body: Any, *, message: Any = None, delta: Any = None, finish: str | None = None
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    choice.update({"delta": delta} if kind.endswith("chunk") else {"message": message})
    model = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
    return {"id": "chatcmpl-scripted", "object": kind, "created": int(time.time()), "model": model, "choices": [choice]}


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class ScriptedModel:
    """The server; a context manager that starts it on 127.0.0.1:<free port> and stops it on exit."""

    def __init__(
        self,
        script: Iterable[Reply | ReplyFn] | ReplyFn = (),
        *,
        stream: bool | None = None,
        chunk_size: int = 8,
        model: str = "scripted",
        api_key: str | None = None,
        close_after_stream: bool = False,
    ) -> None:
        self.stream = stream
        self.api_key = api_key  # when set, GET /v1/models needs it as a bearer token
        self.close_after_stream = close_after_stream
        self.chunk_size = chunk_size
        self.model = model
        self.requests: list[Any] = []  # the JSON bodies received (a str when a body was not JSON)
        self.headers: list[dict[str, str]] = []  # their HTTP headers
        self.shapes: list[str] = []  # "sse" or "json" per successful completion served
        self._fn: ReplyFn | None = script if callable(script) else None
        self._script: list[Reply | ReplyFn] = [] if callable(script) else list(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self.connections = 0  # the connections accepted so far (a client that pools reuses one for several requests)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port; still readable after close (for error messages in tests)."""
        assert self._port is not None, "the scripted model was never started"
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-model", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stops serving, aborts pending delays, drops kept-alive connections and joins every thread."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _next_reply(self, body: Any, headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if self._fn is not None:
                item: Reply | ReplyFn = self._fn
            else:
                item = self._script.pop(0) if self._script else EXHAUSTED
        return item(body) if callable(item) else item

    def _wait(self, seconds: float) -> bool:
        """Sleeps; True when the server is stopping meanwhile."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
                self.connections += 1
            else:
                self._conns.discard(conn)
