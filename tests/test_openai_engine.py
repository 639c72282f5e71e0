"""OpenAIEngine against the scripted chat-completions server: both reply shapes, tool calls, errors, cancel."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from backchannel.agent.engines.base import ModelRequest, ToolSpec
from backchannel.agent.engines.openai import OpenAIEngine
from backchannel.errors import EngineError
from backchannel.messages import Message, ToolCall
from conftest import free_port
from scripted_model import ScriptedModel

SEND = ToolSpec(
    name="send_to_peer",
    description="Send a message to a peer.",
    parameters={
        "type": "object",
        "properties": {"target": {"type": "string"}, "message": {"type": "string"}},
        "required": ["target", "message"],
    },
)


def request(*messages: Message, tools: tuple[ToolSpec, ...] = (), system: str = "You are terse.") -> ModelRequest:
    return ModelRequest(
        profile="coder", system_prompt=system, messages=messages or (Message("user", "hi"),), tools=tools
    )


def run_step(
    base_url: str,
    req: ModelRequest | None = None,
    *,
    timeout: float = 10.0,
    api_key: str | None = None,
    deltas: list[str] | None = None,
) -> Message:
    async def go() -> Message:
        engine = OpenAIEngine(
            profile="coder", base_url=base_url, model="tiny", api_key=api_key, timeout_seconds=timeout
        )
        try:
            return await engine.step(req or request(), deltas.append if deltas is not None else None)
        finally:
            await engine.aclose()

    return asyncio.run(go())


def closed_port() -> int:
    return free_port()  # this test process's own: nothing else of the run listens on it


def test_text_reply_in_sse_shape_streams_deltas() -> None:
    text = "Hello there, this reply arrives in several pieces."
    deltas: list[str] = []
    with ScriptedModel([text], stream=True, chunk_size=5) as model:
        reply = run_step(model.base_url, deltas=deltas)
    assert model.shapes == ["sse"]
    assert model.requests[0]["stream"] is True
    assert reply == Message(role="assistant", content=text)
    assert len(deltas) >= 10 and all(deltas)
    assert "".join(deltas) == text


def test_sse_deltas_arrive_while_the_stream_is_still_open() -> None:
    arrivals: list[float] = []

    def on_delta(text: str) -> None:
        arrivals.append(time.monotonic())

    async def go(base_url: str) -> Message:
        engine = OpenAIEngine(profile="coder", base_url=base_url, model="tiny", api_key=None)
        try:
            return await engine.step(request(), on_delta)
        finally:
            await engine.aclose()

    with ScriptedModel([{"content": "one two three four", "chunk_delay": 0.1}], stream=True, chunk_size=4) as model:
        reply = asyncio.run(go(model.base_url))
    assert reply.content == "one two three four"
    assert len(arrivals) == 5
    assert arrivals[-1] - arrivals[0] >= 0.3  # not buffered until the end of the body


def test_text_reply_in_json_shape() -> None:
    deltas: list[str] = []
    with ScriptedModel(["A whole answer at once."], stream=False) as model:
        reply = run_step(model.base_url, deltas=deltas)
    assert model.shapes == ["json"]
    assert reply.role == "assistant" and reply.content == "A whole answer at once."
    assert reply.tool_calls == ()
    assert "".join(deltas) == "A whole answer at once."


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_tool_calls_are_assembled_in_both_shapes(stream: bool) -> None:
    long_message = "please review the patch in branch feature/retry and answer within the hour"
    script = [
        {
            "content": "Asking around.",
            "tool_calls": [
                {"name": "send_to_peer", "arguments": {"target": "bob/reviewer", "message": long_message}},
                {"name": "check_message", "arguments": {"run_id": "run_42"}, "id": None},
            ],
        }
    ]
    with ScriptedModel(script, stream=stream, chunk_size=3) as model:
        reply = run_step(model.base_url, request(tools=(SEND,)))
    assert model.shapes == ["sse" if stream else "json"]
    assert reply.content == "Asking around."
    assert [tc.name for tc in reply.tool_calls] == ["send_to_peer", "check_message"]
    assert json.loads(reply.tool_calls[0].arguments) == {"target": "bob/reviewer", "message": long_message}
    assert json.loads(reply.tool_calls[1].arguments) == {"run_id": "run_42"}
    first, second = (tc.id for tc in reply.tool_calls)
    assert first.startswith("call_") and second.startswith("call_") and first != second  # the second was generated


def test_request_carries_system_prompt_tools_and_tool_results_in_openai_format() -> None:
    history = (
        Message("user", "ask bob"),
        Message(
            "assistant", "", tool_calls=(ToolCall("call_1", "send_to_peer", '{"target": "bob", "message": "hi"}'),)
        ),
        Message("tool", '{"reply": "hello"}', tool_call_id="call_1", name="send_to_peer"),
    )
    with ScriptedModel(["done", "again"]) as model:
        run_step(model.base_url, request(*history, tools=(SEND,)), api_key="sk-test")
        run_step(model.base_url, request(Message("user", "no tools")))
    first, second = model.requests
    assert first["model"] == "tiny" and first["stream"] is True
    assert first["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "ask bob"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "send_to_peer", "arguments": '{"target": "bob", "message": "hi"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"reply": "hello"}', "name": "send_to_peer"},
    ]
    assert first["tools"] == [SEND.to_openai()]
    assert "tools" not in second
    assert second["messages"][0] == {"role": "system", "content": "You are terse."}
    assert model.headers[0].get("Authorization") == "Bearer sk-test"
    assert "Authorization" not in model.headers[1]


def test_one_engine_serves_several_steps() -> None:
    async def go(base_url: str) -> list[str]:
        engine = OpenAIEngine(profile="coder", base_url=base_url + "/", model="tiny", api_key=None)
        try:
            return [(await engine.step(request())).content for _ in range(3)]
        finally:
            await engine.aclose()

    with ScriptedModel(["one", "two"]) as model:
        assert asyncio.run(go(model.base_url)) == ["one", "two", "(script exhausted)"]


STEPS_BACK_TO_BACK = 30  # the server's FIN races the next request: enough steps that the race is run


def test_a_server_that_closes_after_each_stream_still_gets_the_tool_result() -> None:
    """llama.cpp's server closes the connection after every event stream, under keep-alive headers: no step
    (the one after a tool call, nor thirty back to back) may fail on, or be lost to, a connection it closed."""
    call = {"tool_calls": [{"id": "call_1", "name": "send_to_peer", "arguments": {"target": "a", "message": "b"}}]}

    async def go(base_url: str) -> list[Message]:
        engine = OpenAIEngine(profile="coder", base_url=base_url, model="tiny", api_key=None)
        try:
            first = await engine.step(request(tools=(SEND,)))
            result = Message("tool", '{"result": "delivered"}', tool_call_id="call_1", name="send_to_peer")
            second = await engine.step(request(Message("user", "hi"), first, result, tools=(SEND,)))
            rest = [await engine.step(request()) for _ in range(STEPS_BACK_TO_BACK)]  # no pause for a FIN
            return [first, second, *rest]
        finally:
            await engine.aclose()

    again = [f"again {n}" for n in range(STEPS_BACK_TO_BACK)]
    with ScriptedModel([call, "sent it", *again], stream=True, close_after_stream=True) as model:
        first, second, *rest = asyncio.run(go(model.base_url))
    assert first.tool_calls[0].name == "send_to_peer"
    assert [second.content, *(m.content for m in rest)] == ["sent it", *again]
    assert len(model.requests) == 2 + STEPS_BACK_TO_BACK  # each request reached the model once
    assert model.requests[1]["messages"][-1]["tool_call_id"] == "call_1"


def test_each_request_to_the_model_server_goes_on_a_fresh_connection() -> None:
    """The server keeps connections alive; the engine still connects anew for every step (no pooled
    connection for the server to close under a request) and says so in each request."""

    async def go(base_url: str) -> list[str]:
        engine = OpenAIEngine(profile="coder", base_url=base_url, model="tiny", api_key=None)
        try:
            return [(await engine.step(request())).content for _ in range(3)]
        finally:
            await engine.aclose()

    with ScriptedModel(["one", "two", "three"], stream=True) as model:
        assert asyncio.run(go(model.base_url)) == ["one", "two", "three"]
        assert model.connections == 3
    assert [h.get("Connection", "").lower() for h in model.headers] == ["close"] * 3


def test_an_error_from_the_model_server_keeps_its_message_and_never_shows_the_key() -> None:
    key = "sk-secret-model-key"
    reply = {"status": 400, "body": {"error": {"message": f"bad request for key {key}: context too long"}}}
    with ScriptedModel([reply]) as model, pytest.raises(EngineError) as info:
        run_step(model.base_url, api_key=key)
    message = str(info.value)
    assert "HTTP 400" in message and "context too long" in message and "'coder'" in message
    assert key not in message and "[key]" in message
    assert model.headers[0]["Authorization"] == f"Bearer {key}"


def test_a_request_that_may_have_arrived_is_not_sent_again() -> None:
    """The connection drops after the request was read and before any answer: the outcome is unknown, no retry."""
    with (
        ScriptedModel([{"drop": True}, "not asked for"], stream=True) as model,
        pytest.raises(EngineError, match="broke during POST /chat/completions: Server disconnected") as info,
    ):
        run_step(model.base_url)
    assert len(model.requests) == 1
    assert "'coder'" in str(info.value)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ({"status": 500, "body": {"error": {"message": "model exploded"}}}, ["HTTP 500", "model exploded"]),
        ({"status": 503, "body": "upstream overloaded " + "x" * 400}, ["HTTP 503", "upstream overloaded"]),
    ],
    ids=["json-error", "text-error"],
)
def test_http_error_names_profile_and_url(reply: dict[str, Any], expected: list[str]) -> None:
    with ScriptedModel([reply]) as model, pytest.raises(EngineError) as info:
        run_step(model.base_url)
    message = str(info.value)
    assert "'coder'" in message and f"{model.base_url}/chat/completions" in message
    for part in expected:
        assert part in message
    assert "x" * 250 not in message  # the body is cut to 200 characters
    assert info.value.code == "engine_error"


@pytest.mark.parametrize(
    "stream, reply",
    [
        (False, {"raw": "not json"}),
        (False, {"raw": json.dumps({"id": "x", "object": "chat.completion"})}),
        (True, {"raw": "data: {broken\n\n"}),
        (True, {"raw": ": only a comment\n\n"}),
    ],
    ids=["not-json", "no-choices", "bad-sse-chunk", "empty-stream"],
)
def test_malformed_body_raises_engine_error(stream: bool, reply: dict[str, Any]) -> None:
    with ScriptedModel([reply], stream=stream) as model, pytest.raises(EngineError, match="malformed") as info:
        run_step(model.base_url)
    assert "'coder'" in str(info.value) and model.base_url in str(info.value)


def test_error_chunk_mid_stream_raises_engine_error() -> None:
    raw = 'data: {"error": {"message": "context length exceeded"}}\n\n'
    with (
        ScriptedModel([{"raw": raw}], stream=True) as model,
        pytest.raises(EngineError, match="context length exceeded"),
    ):
        run_step(model.base_url)


def test_connection_refused_is_reported_as_unreachable() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(EngineError, match="could not reach") as info:
        run_step(url)
    assert "'coder'" in str(info.value) and url in str(info.value)


def test_slow_reply_hits_the_timeout() -> None:
    with (
        ScriptedModel([{"delay": 3, "content": "too late"}]) as model,
        pytest.raises(EngineError, match="timeout") as info,  # given up on at 0.3 s, not answered at 3 s
    ):
        run_step(model.base_url, timeout=0.3)
    assert "'coder'" in str(info.value)


def test_stream_stalling_midway_hits_the_timeout() -> None:
    with (
        ScriptedModel([{"chunk_delay": 1, "content": "slow words trickle in"}], stream=True, chunk_size=4) as model,
        pytest.raises(EngineError, match="timeout"),
    ):
        run_step(model.base_url, timeout=0.5)


def test_cancelling_a_step_during_a_slow_reply_returns_promptly() -> None:
    async def go(base_url: str) -> float:
        engine = OpenAIEngine(profile="coder", base_url=base_url, model="tiny", api_key=None)
        try:
            task = asyncio.create_task(engine.step(request()))
            await asyncio.sleep(0.3)
            assert not task.done()
            cancelled_at = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - cancelled_at
        finally:
            await engine.aclose()

    with ScriptedModel([{"delay": 5, "content": "never seen"}]) as model:
        assert asyncio.run(go(model.base_url)) < 1.0
        assert len(model.requests) == 1  # the request was in flight when cancelled


def test_scripted_model_serves_models() -> None:
    with ScriptedModel([], model="tiny") as model:
        assert httpx.get(f"{model.base_url}/models").json()["data"][0]["id"] == "tiny"
