"""The openai engine against a real llama.cpp server (xllamacpp, SmolLM2-135M): `make interop`.

SmolLM2 is far too small to be useful; these tests check the protocol: streaming, usage, a session's
history, and a tool-using turn, whose second model call goes out after llama.cpp has closed the
connection of the first (its server does so after every event stream).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_server import MISSING, N_PREDICT, LlamaServer

from backchannel.agent.engines.base import ModelRequest
from backchannel.agent.engines.openai import OpenAIEngine, build_payload
from backchannel.agent.persona import MESSAGING_NOTE
from backchannel.agent.tools import TOOLBOX
from backchannel.home.profiles import DEFAULT_SOUL
from backchannel.messages import Message
from conftest import run_cli

pytestmark = [
    pytest.mark.interop,
    # `make interop` sets BACKCHANNEL_REQUIRE_LLAMA: there a missing wheel is a failure, not a skip
    pytest.mark.skipif(MISSING is not None and not os.environ.get("BACKCHANNEL_REQUIRE_LLAMA"), reason=str(MISSING)),
]
# What the server counts for a minimal message ("hi") to the default persona with every tool offered:
# the persona, Backchannel's note, the tool schemas and the test template's one worked call.
# 1,034 before issue 13 shortened them, 802 after, 848 with every argument described; 962 with the teams (issue 25):
# group:NAME in send_to_session's address, the notify_when_idle tool (about 80 tokens: the price of a tool) and
# send_to_session's mode (31); 981 with send_to_peer's run_id (19: an argument where a tool would cost about 80; a
# profile that may message no peer is not offered it, and every argument of every tool is counted here); 1,041 with
# the deadline of send_to_session and send_to_peer (30 each: offered only where a profile's send_options asks).
PROMPT_TOKENS_BOUND = 1045


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with LlamaServer() as server:
        yield server.start(tmp_path_factory.mktemp("llama"))


def make_profile(root: Path, base_url: str) -> Path:
    created = run_cli("profile", "create", "small", "--engine", "openai", "--base-url", base_url, "--model", "smollm2")
    assert created.exit_code == 0, created.stderr
    profile = root / "profiles/small"
    config = (profile / "config.yaml").read_text().replace("max_turns: 20", "max_turns: 3")
    # A step of the small model on a loaded machine can take minutes: past the default 120 s.
    (profile / "config.yaml").write_text(
        config.replace("  default: smollm2\n", "  default: smollm2\n  timeout_seconds: 600\n")
    )
    return profile


def default_request(*messages: Message) -> ModelRequest:
    system = DEFAULT_SOUL.format(name="default").strip() + "\n\n" + MESSAGING_NOTE
    return ModelRequest("default", system, messages, [tool.spec for tool in TOOLBOX.values()])


def test_a_streamed_reply_arrives_in_pieces(llama: LlamaServer) -> None:
    deltas: list[str] = []

    async def go() -> Message:
        engine = OpenAIEngine(profile="p", base_url=llama.base_url, model="smollm2", api_key=None, timeout_seconds=600)
        request = ModelRequest("p", "You are terse.", [Message("user", "Say hello.")], [])
        try:
            return await engine.step(request, deltas.append)
        finally:
            await engine.aclose()

    reply = asyncio.run(go())
    assert reply.content and not reply.tool_calls
    assert len(deltas) > 1 and "".join(deltas) == reply.content


def test_usage_counts_the_prompt_and_the_reply(llama: LlamaServer) -> None:
    short = build_payload("smollm2", ModelRequest("p", "You are terse.", [Message("user", "Say hello.")], []))
    usage = llama.completion(short)["usage"]
    assert 0 < usage["completion_tokens"] <= N_PREDICT
    longer = build_payload("smollm2", ModelRequest("p", "You are terse. " * 20, [Message("user", "Say hello.")], []))
    assert llama.prompt_tokens(longer) > usage["prompt_tokens"]


def test_a_tool_using_turn_completes(initialised: Path, llama: LlamaServer) -> None:
    """The model calls the memory tool; the second model call (with the tool's result) must go out and answer."""
    profile = make_profile(initialised, llama.base_url)
    result = run_cli("chat", "-p", "small", "-q", "Remember that I like green tea.", "--json")
    assert result.exit_code == 0, result.stderr + llama.log()[-2000:]
    remembered = (profile / "memories/USER.md").read_text() + (profile / "memories/MEMORY.md").read_text()
    assert "tea" in remembered
    session = json.loads(result.stdout)["session_id"]
    roles = [m["role"] for m in json.loads(run_cli("sessions", "show", session, "--json").stdout)["messages"]]
    assert roles[:3] == ["user", "assistant", "tool"] and roles[-1] == "assistant" and len(roles) >= 4


def test_a_session_keeps_its_history(initialised: Path, llama: LlamaServer) -> None:
    make_profile(initialised, llama.base_url)
    first = run_cli("chat", "-p", "small", "-q", "Hello, I am Ada.", "--json")
    assert first.exit_code == 0, first.stderr
    session = json.loads(first.stdout)["session_id"]
    second = run_cli("chat", "--resume", session, "-q", "What is my name?", "--json")
    assert second.exit_code == 0, second.stderr
    assert json.loads(second.stdout)["session_id"] == session
    said = [m["content"] for m in json.loads(run_cli("sessions", "show", session, "--json").stdout)["messages"]]
    assert said[0] == "Hello, I am Ada." and "What is my name?" in said[1:]


def test_backchannel_prompt_overhead_stays_small(llama: LlamaServer) -> None:
    """Backchannel's own instructions and tool schemas, as the real server counts them for a minimal message."""
    tokens = llama.prompt_tokens(build_payload("smollm2", default_request(Message("user", "hi"))))
    assert tokens <= PROMPT_TOKENS_BOUND, f"a minimal turn's prompt grew to {tokens} tokens"
