"""Traces (issue 27): one exchange is one trace across real gateways, sent over OTLP/HTTP to a real receiver.

The person's message (with a traceparent of its caller) → research on alpha → `send_to_session` builds →
`send_to_peer` beta's default agent, over the Hermes dialect and over A2A: every span of both gateways in the
caller's trace, each parented on the one before; a wake-up after a receipt continues the trace; a turn cut by
SIGKILL runs again in the same trace; a bad traceparent starts a new trace; an exporter that is down never
holds a turn up and says so once; message text stays out of the spans unless `traces.content` is on, and so do
an error's message and traceback: a failed turn's spans say its class and code (issue 38 item 10).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, free_port
from gateway_http import TERMINAL, client, poll
from otlp_receiver import OtlpReceiver, Span
from test_exchanges_e2e import peered
from test_peers_e2e import Pair, _init_home, cli, messaging_rules

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def tool(name: str, **arguments: Any) -> str:
    """An echo agent's message that makes it call `name` with these arguments."""
    return f"/tool {name} {json.dumps(arguments)}"


def one(spans: list[Span], name: str, **attributes: Any) -> Span:
    found = [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, (name, attributes, [(s.name, s.attributes) for s in spans])
    return found[0]


def start_run(gw: GatewayProcess, profile: str, message: str, **headers: str) -> str:
    r = httpx.post(f"{gw.url}/p/{profile}/v1/runs", json={"input": message}, headers=gw.headers(**headers), timeout=10)
    assert r.status_code == 202, r.text
    run_id: str = r.json()["run_id"]
    return run_id


def finished(gw: GatewayProcess, run_id: str, within: float = 30.0) -> dict[str, Any]:
    with client(gw) as c:
        return poll(c, run_id, TERMINAL, within)


def running(gw: GatewayProcess, run_id: str) -> None:
    with client(gw) as c:
        poll(c, run_id, {"running"}, 30.0)


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module", params=["hermes-dialect", "a2a"])
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, otlp: OtlpReceiver
) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp(f"traces-{request.param}")
    yield from peered(base, a2a=request.param == "a2a", env=otlp.env, profiles=("research", "builds"))


def in_trace(otlp: OtlpReceiver, trace_id: str) -> list[Span]:
    return [s for s in otlp.spans if s.trace_id == trace_id]


def test_one_exchange_is_one_trace_across_two_gateways(
    pair: Pair, otlp: OtlpReceiver, request: pytest.FixtureRequest
) -> None:
    a2a = "a2a" in request.node.callspec.id
    trace_id = secrets.token_hex(16)
    to_beta = tool("send_to_peer", target="beta", message="hello from builds", wait_seconds=30)
    to_builds = tool("send_to_session", session_id="builds", message=to_beta, wait_seconds=30)
    with (
        messaging_rules(pair.a, "research", allow=["builds"]),
        messaging_rules(pair.a, "builds", allow=["peer:beta", "peer:beta/*"]),
        messaging_rules(pair.b, "default", accept=["peer:alpha/*", "peer:alpha"]),
    ):
        run_id = start_run(pair.alpha, "research", to_builds, traceparent=f"00-{trace_id}-{CALLER_SPAN}-01")
        run = finished(pair.alpha, run_id)
    assert run["status"] == "completed", run
    assert "default (echo): hello from builds" in run["output"], run["output"]
    # beta's A2A server span ends after its answer is sent: it may come in a batch after its run's.
    spans = otlp.wait_for(
        lambda got: (
            sum(s.trace_id == trace_id and s.name.startswith("invoke_agent") for s in got) >= 4
            and (not a2a or any(s.trace_id == trace_id and (s.service, s.name) == ("beta", "SendMessage") for s in got))
        ),
        "the four agent invocations of the exchange (and beta's A2A request)",
    )
    spans = in_trace(otlp, trace_id)
    assert {s.service for s in spans} == {"alpha", "beta"}

    # alpha: research's run (the request that handed the message in: its server span, the caller's child), its
    # tool call, builds' run, its tool call, the call to beta.
    assert not [s for s in spans if s.name.startswith("POST /p/")]  # no span of the request beside its run's
    research = one(spans, "invoke_agent research")
    assert (research.service, research.kind, research.parent_id) == ("alpha", "server", CALLER_SPAN)
    assert research["backchannel.run_id"] == run_id
    assert research["gen_ai.agent.name"] == "research"
    assert research["gen_ai.conversation.id"] == run["session_id"]
    assert (research["backchannel.hops"], research["backchannel.outcome"]) == (0, "delivered")
    assert research["backchannel.landed"] == "started" and research["backchannel.sender"].startswith("human:")
    assert research["gen_ai.usage.input_tokens"] > 0 and research["gen_ai.usage.output_tokens"] > 0
    chat = [s for s in spans if s.name == "chat echo" and s.parent_id == research.span_id]
    assert chat and all(s.kind == "client" and s["gen_ai.usage.input_tokens"] > 0 for s in chat)
    send = one(spans, "execute_tool send_to_session")
    assert send.parent_id == research.span_id
    builds = one(spans, "invoke_agent builds")
    assert (builds.kind, builds.parent_id, builds["backchannel.hops"]) == ("internal", send.span_id, 1)
    assert builds["backchannel.sender"] == f"research/{run['session_id']}"
    assert len(builds["backchannel.chain"]) == 1  # research waits on it
    to_peer = one(spans, "execute_tool send_to_peer")
    assert to_peer.parent_id == builds.span_id
    client = one(spans, "invoke_agent peer:beta")
    assert (client.kind, client.parent_id, client["backchannel.outcome"]) == ("client", to_peer.span_id, "delivered")

    # beta: the requests under alpha's client span (A2A: its method's span), then its run.
    beta_spans = [s for s in spans if s.service == "beta"]
    if a2a:
        sent = one([s for s in spans if s.service == "alpha"], "SendMessage", **{"a2a.method.name": "SendMessage"})
        assert (sent.kind, sent.parent_id) == ("client", client.span_id)
        assert sent["a2a.task.state"] == "TASK_STATE_COMPLETED"
        served = one(beta_spans, "SendMessage", **{"a2a.method.name": "SendMessage"})
        assert served.kind == "server" and served["a2a.task.state"] == "TASK_STATE_COMPLETED"
        assert served["a2a.task.id"] == sent["a2a.task.id"]
        assert served.parent_id == sent.span_id  # the A2A method's span is the request's
        parent_of_run = served
    else:
        # The Hermes dialect: the session looked up or made, then the chat (its run's span), each under the
        # client span.
        looked = [s for s in beta_spans if s.name.startswith(("GET ", "POST "))]
        assert looked and all(s.parent_id == client.span_id for s in looked), looked
        assert not any(s.name.endswith("/chat") for s in looked)
        parent_of_run = client
    far = one(spans, "invoke_agent default")
    assert (far.service, far.kind, far.parent_id) == ("beta", "server", parent_of_run.span_id)
    assert far["backchannel.hops"] == 2 and far["backchannel.sender"].startswith("peer:alpha")
    if a2a:
        assert parent_of_run["a2a.task.id"] == far["backchannel.run_id"]
    # Nothing of what was said is in a span unless traces.content says so.
    assert not any("backchannel.message" in s.attributes or "backchannel.reply" in s.attributes for s in spans)


def test_a_wake_after_a_receipt_continues_the_trace(pair: Pair, otlp: OtlpReceiver) -> None:
    """research sends to builds without waiting: its turn ends; builds' run ends later, and its reply wakes
    research's session in a run of its own, a child of builds' run."""
    trace_id = secrets.token_hex(16)
    with messaging_rules(pair.a, "research", allow=["builds"]):
        message = tool("send_to_session", session_id="builds", message="/sleep 0.3\nthe report", wait_seconds=0)
        run_id = start_run(pair.alpha, "research", message, traceparent=f"00-{trace_id}-{CALLER_SPAN}-01")
        assert finished(pair.alpha, run_id)["status"] == "completed"
        spans = otlp.wait_for(
            lambda got: sum(s.trace_id == trace_id and s.name == "invoke_agent research" for s in got) == 2,
            "the wake-up's run",
        )
    spans = in_trace(otlp, trace_id)
    builds = one(spans, "invoke_agent builds")
    first, woken = sorted((s for s in spans if s.name == "invoke_agent research"), key=lambda s: s.start_ns)
    assert first["backchannel.run_id"] == run_id
    assert (woken.kind, woken.parent_id) == ("internal", builds.span_id)
    assert woken["backchannel.hops"] == 2 and woken["backchannel.outcome"] == "delivered"


def test_a_refusal_is_a_span_with_its_code(pair: Pair, otlp: OtlpReceiver) -> None:
    trace_id = secrets.token_hex(16)
    message = tool("send_to_session", session_id="builds", message="not allowed", wait_seconds=0)
    run_id = start_run(pair.alpha, "research", message, traceparent=f"00-{trace_id}-{CALLER_SPAN}-01")
    assert finished(pair.alpha, run_id)["status"] == "completed"
    otlp.wait_for(lambda got: any(s.trace_id == trace_id and s.name == "invoke_agent builds" for s in got), "refusal")
    refused = one(in_trace(otlp, trace_id), "invoke_agent builds")
    assert refused.error and refused["backchannel.outcome"] == "refused"
    assert refused["backchannel.refusal.code"] == refused["error.type"] == "not_allowed"
    assert refused.parent_id == one(in_trace(otlp, trace_id), "execute_tool send_to_session").span_id


@pytest.mark.parametrize(
    "header",
    ["garbage", "00-" + "0" * 32 + "-" + CALLER_SPAN + "-01", f"00-{CALLER_TRACE}-{CALLER_SPAN}-01" + "x" * 5000],
    ids=["malformed", "zero-trace-id", "oversized"],
)
def test_a_bad_traceparent_starts_a_new_trace_and_is_no_error(pair: Pair, otlp: OtlpReceiver, header: str) -> None:
    marker = secrets.token_hex(4)
    run_id = start_run(pair.alpha, "default", f"bad header {marker}", traceparent=header, tracestate="x" * 600)
    assert finished(pair.alpha, run_id)["status"] == "completed"
    spans = otlp.wait_for(
        lambda got: any(s.attributes.get("backchannel.run_id") == run_id for s in got), "the run's span"
    )
    [span] = [s for s in spans if s.attributes.get("backchannel.run_id") == run_id and s.name.startswith("invoke")]
    assert span.parent_id == "" and span.trace_id not in (CALLER_TRACE, "0" * 32)


def test_a_turn_cut_by_sigkill_runs_again_in_the_same_trace(tmp_path: Path) -> None:
    with OtlpReceiver() as otlp:
        gw = _init_home(tmp_path / "home")
        gw.env = otlp.env("alpha")
        gw.start()
        try:
            run_id = start_run(gw, "default", "/sleep 30\nslow", traceparent=TRACEPARENT)
            running(gw, run_id)  # its span is open, not exported
            gw.kill()
            gw.start()  # its runs left running by a dead process are taken back at once
            stopped = httpx.post(f"{gw.url}/v1/runs/{run_id}/stop", headers=gw.headers(), timeout=10)
            assert stopped.status_code == 200, stopped.text
            spans = otlp.wait_for(
                lambda got: any(
                    s.attributes.get("backchannel.run_id") == run_id and s.name.startswith("invoke_agent") for s in got
                ),
                "the run's span after the restart",
            )
        finally:
            gw.kill()
    [run] = [s for s in spans if s.name == "invoke_agent default"]
    assert (run.trace_id, run.parent_id) == (CALLER_TRACE, CALLER_SPAN)
    assert run["backchannel.attempt"] == 2 and run["backchannel.outcome"] == "failed"


def test_an_exporter_that_is_down_holds_no_turn_up_and_says_so_once(tmp_path: Path) -> None:
    gw = _init_home(tmp_path / "home")
    gw.env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        "OTEL_BSP_SCHEDULE_DELAY": "20",
    }
    gw.start()
    try:
        for n in range(6):
            run = finished(gw, start_run(gw, "default", f"turn {n}"), within=10)
            assert run["status"] == "completed"
            time.sleep(0.2)
        time.sleep(1.5)
    finally:
        gw.kill()
    assert gw.log_path is not None
    log = gw.log_path.read_text()
    assert log.count("traces could not be sent to otlp") == 1, log
    assert "Traceback" not in log


def test_traces_content_puts_bounded_text_into_the_spans(tmp_path: Path) -> None:
    with OtlpReceiver() as otlp:
        gw = _init_home(tmp_path / "home")
        gw.env = otlp.env("alpha")
        path = config.config_path(gw.root)
        data = config.load_yaml(path)
        data["traces"] = {"content": True, "content_chars": 20}
        config.write_yaml(path, data)
        gw.start()
        try:
            run_id = start_run(gw, "default", "a message of more than twenty characters")
            finished(gw, run_id)
            spans = otlp.wait_for(
                lambda got: any(s.attributes.get("backchannel.run_id") == run_id for s in got), "the run's span"
            )
        finally:
            gw.kill()
    [run] = [s for s in spans if s.attributes.get("backchannel.run_id") == run_id]
    assert run["backchannel.message"] == "a message of more th… (20 more characters)"
    assert run["backchannel.reply"].startswith("default (echo): a me")


@pytest.mark.parametrize("content", [False, True], ids=["content-off", "content-on"])
def test_a_failed_turns_spans_say_its_class_and_code_and_its_words_only_with_traces_content(
    tmp_path: Path, content: bool
) -> None:
    words = "the secret plan for friday"
    with OtlpReceiver() as otlp:
        gw = _init_home(tmp_path / "home")
        gw.env = otlp.env("alpha")
        if content:
            path = config.config_path(gw.root)
            data = config.load_yaml(path)
            data["traces"] = {"content": True}
            config.write_yaml(path, data)
        gw.start()
        try:
            run_id = start_run(gw, "default", f"/fail {words}", traceparent=TRACEPARENT)
            assert finished(gw, run_id)["status"] == "failed"
            spans = otlp.wait_for(
                lambda got: any(s.attributes.get("backchannel.run_id") == run_id for s in got), "the run's span"
            )
        finally:
            gw.kill()
    spans = in_trace(otlp, CALLER_TRACE)
    run = one(spans, "invoke_agent default")
    chat = one(spans, "chat echo")
    assert chat.parent_id == run.span_id
    [(event, raised)] = chat.events
    if content:  # the words, and where they were raised
        assert words in run.status_message and words in chat.status_message
        assert words in raised["exception.message"] and "Traceback" in raised["exception.stacktrace"]
    else:  # nothing of them anywhere: no status description, no message, no traceback
        for span in spans:
            shown = repr((span.status_message, span.attributes, span.events))
            assert words not in shown and "Traceback" not in shown, (span.name, shown)
        assert run.status_message == chat.status_message == ""
        assert set(raised) == {"exception.type"}
    for span in (run, chat):  # the class and the code, always
        assert span.error and span["error.type"] == "engine_error", (span.name, span.attributes)
    assert event == "exception" and raised["exception.type"] == "backchannel.errors.EngineError"


def test_an_mcp_hosts_trace_context_is_continued(tmp_path: Path) -> None:
    """An MCP host's `tools/call` carries its context in `_meta` (SEP-414): the send it makes is in its trace."""
    import asyncio

    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    with OtlpReceiver() as otlp:
        gw = _init_home(tmp_path / "home")
        gw.env = otlp.env("alpha")
        assert cli(gw.root, "profile", "create", "builds").exit_code == 0
        gw.start()

        async def main() -> str:
            client = httpx2.AsyncClient(headers=gw.headers(), timeout=30)  # the send waits up to 10 s: a slow one too
            async with (
                client,
                streamable_http_client(f"{gw.url}/p/default/mcp", http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool(
                    "send_to_session",
                    {"session_id": "builds", "message": "from an MCP host", "wait_seconds": 10},
                    meta={"traceparent": TRACEPARENT},
                )
                assert result.content and result.content[0].type == "text"
                return result.content[0].text

        try:
            with messaging_rules(gw.root, "default", allow=["builds"]):
                answer = json.loads(asyncio.run(main()))
            assert answer["result"] == "delivered", answer
            spans = otlp.wait_for(  # the tool call's span may be exported in a later batch than the run's
                lambda got: {"invoke_agent builds", "tools/call send_to_session"} <= {s.name for s in got},
                "the send's run on builds and the host's tool call",
            )
        finally:
            gw.kill()
    called = one(spans, "tools/call send_to_session")
    assert (called.kind, called.trace_id, called.parent_id) == ("server", CALLER_TRACE, CALLER_SPAN)
    executed = one(spans, "execute_tool send_to_session")
    assert executed.parent_id == called.span_id
    builds = one(spans, "invoke_agent builds")
    assert (builds.trace_id, builds.parent_id) == (CALLER_TRACE, executed.span_id)


@pytest.mark.parametrize(
    ("env", "on", "said"),
    [
        ({}, False, ""),
        ({"OTEL_TRACES_EXPORTER": "none"}, False, ""),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, False, ""),
        ({"OTEL_TRACES_EXPORTER": "console"}, True, ""),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, True, ""),
        ({"OTEL_TRACES_EXPORTER": "zipkinn"}, False, "trace exporter 'zipkinn' is not installed (installed: console"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"},
            False,
            "OTEL_EXPORTER_OTLP_PROTOCOL 'carrier-pigeon' is not one of grpc",
        ),
    ],
    ids=["nothing-set", "none", "sdk-disabled", "console", "an-otlp-endpoint", "unknown-exporter", "bad-protocol"],
)
def test_tracing_is_on_only_when_the_otel_variables_ask(env: dict[str, str], on: bool, said: str) -> None:
    """Decided from the standard variables alone; a wrong one is a warning naming it, never a failure; with nothing
    asked for, OpenTelemetry is not even imported."""
    code = (
        "import logging, sys\nlogging.basicConfig(level=logging.WARNING, format='%(message)s')\n"
        "from backchannel import tracing\n"
        "print(tracing.setup(), 'opentelemetry' in sys.modules)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(on), str(on or bool(said))], (done.stdout, done.stderr)
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_held_message_approved_later_continues_its_trace(pair: Pair, otlp: OtlpReceiver) -> None:
    """A message held for the person runs, once approved, in the trace of the turn that sent it; the hold is a
    span of its own inside the run's."""
    trace_id = secrets.token_hex(16)
    with messaging_rules(pair.a, "research", allow=["builds"]), messaging_rules(pair.a, "builds", hold=["research"]):
        message = tool("send_to_session", session_id="builds", message="held for the person", wait_seconds=0)
        run_id = start_run(pair.alpha, "research", message, traceparent=f"00-{trace_id}-{CALLER_SPAN}-01")
        assert finished(pair.alpha, run_id)["status"] == "completed"
        held = httpx.get(f"{pair.alpha.url}/v1/held", headers=pair.alpha.headers(), timeout=10).json()
        [waiting] = [h for h in held["data"] if h["message"] == "held for the person"]
        time.sleep(0.3)  # held a while
        approved = httpx.post(
            f"{pair.alpha.url}/v1/held/{waiting['run_id']}/approve", headers=pair.alpha.headers(), timeout=10
        )
        assert approved.status_code == 200, approved.text
        assert finished(pair.alpha, waiting["run_id"])["status"] == "completed"
    spans = otlp.wait_for(
        lambda got: any(s.trace_id == trace_id and s.name == "invoke_agent builds" for s in got), "the held run"
    )
    spans = in_trace(otlp, trace_id)
    builds = one(spans, "invoke_agent builds")
    assert builds.parent_id == one(spans, "execute_tool send_to_session").span_id
    assert builds["backchannel.landed"] == "held" and builds["backchannel.outcome"] == "delivered"
    hold = one(spans, "backchannel.held")
    assert (hold.parent_id, hold["backchannel.released"]) == (builds.span_id, True)
    assert hold.end_ns - hold.start_ns >= 300_000_000
