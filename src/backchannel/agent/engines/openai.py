"""The `openai` engine: one step against an OpenAI-compatible chat-completions endpoint (SSE or JSON replies)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from ...errors import EngineError
from ...messages import Message, ToolCall, Usage
from ...net.model_server import ModelServer
from ...net.sse import Event, SseParser
from .base import ModelRequest, OnDelta


def to_openai_message(msg: Message) -> dict[str, Any]:
    """One of our messages in chat-completions form."""
    out: dict[str, Any] = {"role": msg.role, "content": msg.content}
    if msg.role == "assistant" and msg.tool_calls:
        out["tool_calls"] = [
            {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments or "{}"}}
            for tc in msg.tool_calls
        ]
    if msg.role == "tool":
        out["tool_call_id"] = msg.tool_call_id or ""
        if msg.name is not None:
            out["name"] = msg.name
    return out


def build_payload(model: str, request: ModelRequest) -> dict[str, Any]:
    """The JSON body of a streaming chat-completions request (system prompt first, tools only when offered)."""
    messages = [{"role": "system", "content": request.system_prompt}] if request.system_prompt else []
    messages += [to_openai_message(m) for m in request.messages]
    payload: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        payload["tools"] = [tool.to_openai() for tool in request.tools]
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}  # the last chunk says what the call read and wrote
    return payload


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


class _Reply:
    """Accumulates one assistant reply, from stream chunks or from a whole chat.completion body."""

    def __init__(self, where: str, on_delta: OnDelta | None) -> None:
        self.where = where
        self.on_delta = on_delta
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.chunks = 0
        self.finished = False  # a chunk said why the reply ended (finish_reason): the stream is complete
        self.usage: Usage | None = None  # as the server reports it (a stream: its last chunk, when asked)

    def bad(self, reason: str) -> EngineError:
        return EngineError(f"{self.where} returned a malformed response: {reason}")

    def check(self, body: Any, what: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise self.bad(f"{what} is not a JSON object")
        error = body.get("error")
        if error:
            detail = error.get("message") if isinstance(error, dict) else error
            raise EngineError(f"{self.where} reported an error: {detail}")
        choices = body.get("choices")
        if not isinstance(choices, list) or (choices and not isinstance(choices[0], dict)):
            raise self.bad(f"{what} has no choices")
        return choices[0] if choices else {}

    def add_text(self, content: Any) -> None:
        text = _text_of(content)
        if text:
            self.text.append(text)
            if self.on_delta is not None:
                self.on_delta(text)

    def add_call(self, fragment: Any, index: Any) -> None:
        if not isinstance(fragment, dict) or not isinstance(fragment.get("function") or {}, dict):
            raise self.bad("a tool call is not an object")
        fn = fragment.get("function") or {}
        call_id = fragment.get("id")
        if not isinstance(index, int):  # no index: a new id starts a new call, otherwise continue the last one
            last = max(self.calls, default=None)
            fresh = last is None or (call_id and self.calls[last]["id"] and self.calls[last]["id"] != call_id)
            index = (0 if last is None else last + 1) if fresh else last
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        if call_id and not slot["id"]:
            slot["id"] = str(call_id)
        if fn.get("name") and not slot["name"]:
            slot["name"] = str(fn["name"])
        args = fn.get("arguments")
        if args is not None:
            slot["arguments"].append(args if isinstance(args, str) else json.dumps(args))

    def feed_events(self, events: list[Event]) -> bool:
        """Feeds stream events; True once `[DONE]` arrived."""
        return self.feed_payloads([e.data for e in events if e.data.strip()])

    def feed_payloads(self, payloads: list[str]) -> bool:
        for payload in payloads:
            if payload.strip() == "[DONE]":
                return True
            try:
                chunk = json.loads(payload)
            except ValueError:
                if "\n" in payload:  # `data:` lines without blank lines between them: one chunk per line
                    if self.feed_payloads([line for line in payload.split("\n") if line.strip()]):
                        return True
                    continue
                raise self.bad(f"stream chunk is not JSON: {payload[:200]!r}") from None
            choice = self.check(chunk, "stream chunk")
            self.usage = Usage.of(chunk.get("usage")) or self.usage
            self.chunks += 1
            self.finished = self.finished or bool(choice.get("finish_reason"))
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise self.bad("stream chunk has a delta that is not an object")
            self.add_text(delta.get("content"))
            for fragment in delta.get("tool_calls") or []:
                self.add_call(fragment, fragment.get("index") if isinstance(fragment, dict) else None)
        return False

    def feed_body(self, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            raise self.bad(f"body is not JSON: {raw[:200].decode('utf-8', 'replace')!r}") from None
        choice = self.check(body, "body")
        self.usage = Usage.of(body.get("usage"))
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self.bad("body has no choices[0].message")
        self.add_text(message.get("content"))
        for position, fragment in enumerate(message.get("tool_calls") or []):
            self.add_call(fragment, position)

    def message(self) -> Message:
        calls = []
        for _, slot in sorted(self.calls.items()):
            if not slot["name"]:
                raise self.bad("a tool call has no function name")
            call_id = slot["id"] or f"call_{uuid.uuid4().hex[:24]}"
            calls.append(ToolCall(id=call_id, name=slot["name"], arguments="".join(slot["arguments"])))
        return Message(role="assistant", content="".join(self.text), tool_calls=tuple(calls), usage=self.usage)


def _http_error(where: str, status: int, raw: bytes) -> str:
    snippet = raw.decode("utf-8", "replace")[:200]
    detail = None
    try:
        error = json.loads(raw).get("error")
        detail = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        pass
    reason = f": {detail}" if isinstance(detail, str) and detail else ""
    return f"{where} returned HTTP {status}{reason} (body: {snippet!r})"


class OpenAIEngine:
    """Computes model steps against `{base_url}/chat/completions`, streaming when the server does."""

    name = "openai"
    uses_context = True
    keeps_session = False
    offers_tools = True

    def __init__(
        self, *, profile: str, base_url: str, model: str, api_key: str | None, timeout_seconds: float = 120.0
    ) -> None:
        self.profile = profile
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_seconds = timeout_seconds
        self._api_key = api_key
        self._server = self._client(self.url, self.timeout_seconds)

    def _client(self, url: str, timeout: float) -> ModelServer:
        where = f"model endpoint {url!r} for profile {self.profile!r}"
        return ModelServer(self.base_url, self._api_key, who=where, error=EngineError, timeout=timeout)

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        payload = build_payload(self.model, request)
        try:
            async with asyncio.timeout(self.timeout_seconds):
                return await self._exchange(self._server.who, payload, on_delta)
        except TimeoutError as exc:
            raise EngineError(
                f"{self._server.who} hit the timeout: no complete answer within {self.timeout_seconds:g}s"
            ) from exc

    async def _exchange(self, where: str, payload: dict[str, Any], on_delta: OnDelta | None) -> Message:
        """One request and its whole answer."""
        reply = _Reply(where, on_delta)
        async with self._server.chat_completions(payload) as resp:
            if resp.status >= 400:
                raise EngineError(self._server.scrub(_http_error(where, resp.status, await resp.read())))
            if "text/event-stream" in resp.headers.get("content-type", "").lower():
                parser, done = SseParser(), False
                async for raw in resp.chunks():
                    if reply.feed_events(parser.feed(raw)):
                        done = True
                        break
                if not done:
                    done = reply.feed_events(parser.close())
            else:
                body = await resp.read()
                if not body.lstrip().startswith(b"data:"):
                    reply.feed_body(body)
                    return reply.message()
                parser = SseParser()  # an event stream under the wrong content type
                done = reply.feed_events(parser.feed(body) + parser.close())
        if reply.chunks == 0:
            raise reply.bad("the event stream carried no chunks")
        if not (done or reply.finished):  # half a reply is not a reply: the stream was cut
            raise EngineError(
                f"{where} closed its event stream before the reply was complete (after {reply.chunks} chunks, "
                "with no finish_reason and no [DONE])"
            )
        return reply.message()

    async def list_models(self, *, timeout: float) -> list[str]:
        """The model ids `{base_url}/models` lists, with the profile's key (what `doctor` checks the model against).

        An EngineError with code `endpoint_auth` when the key is refused, `no_model_list` when the endpoint
        answers but lists nothing readable; any other EngineError means it could not be reached."""
        server = self._client(f"{self.base_url}/models", timeout)
        where = server.who
        try:
            async with asyncio.timeout(timeout):
                resp = await server.models(timeout=timeout)
        except TimeoutError as exc:
            raise EngineError(f"{where} hit the timeout: no complete answer within {timeout:g}s") from exc
        finally:
            await server.aclose()
        status, raw = resp.status, resp.content
        if status in (401, 403):
            raise EngineError(server.scrub(_http_error(where, status, raw)), code="endpoint_auth")
        if status >= 400:
            raise EngineError(server.scrub(_http_error(where, status, raw)), code="no_model_list")
        try:
            data = json.loads(raw).get("data")
        except (ValueError, AttributeError):
            data = None
        if not isinstance(data, list):
            raise EngineError(f"{where} answered without a model list (no JSON 'data' list)", code="no_model_list")
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]

    async def aclose(self) -> None:
        await self._server.aclose()
