"""Hermes sessions messaging each other through Backchannel: two real Hermes gateways (each version) on
scripted models, each a Backchannel profile with the hermes engine, the Backchannel plugin installed and enabled.

    research's Hermes agent --send_to_session("builds")--> plugin --HTTP--> Backchannel gateway (policy,
    queue, ledger) --hermes engine--> builds' Hermes session --reply--> research's tool result
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hermes_gateway import HERMES_19, HermesGateway, HermesPython, each_hermes

from conftest import GatewayProcess, api_key, run_cli
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop
pytest_generate_tests = each_hermes  # hermes_python: each test on each Hermes version
KEY = "interop-hermes-key-0123456789"


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@dataclass
class Agent:
    """One Hermes agent's scripted model: `decide(last user text, request body)` says what it does next;
    after a tool result it answers `<name> got: <result>`. It measures how many of its calls overlap."""

    name: str
    decide: Callable[[str, dict[str, Any]], Any]
    delay: float = 0.0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    active: int = 0
    most_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Any:
        with self.lock:
            self.bodies.append(body)
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            last = body["messages"][-1]
            if last["role"] == "tool":
                return f"{self.name} got: {text_of(last['content'])}"
            user = next(m for m in reversed(body["messages"]) if m["role"] == "user")
            return self.decide(text_of(user["content"]), body)
        finally:
            with self.lock:
                self.active -= 1

    def turns_seen(self) -> list[str]:
        """The user message of each model call that started a turn (not the calls after a tool result)."""
        out = []
        for body in self.bodies:
            if body["messages"][-1]["role"] == "user":
                out.append(text_of(body["messages"][-1]["content"]))
        return out


@contextlib.contextmanager
def hermes_agent(
    agent: Agent, soul: str, backchannel: GatewayProcess, hermes_python: HermesPython
) -> Iterator[HermesGateway]:
    env = (
        f"BACKCHANNEL_URL={backchannel.url}\nBACKCHANNEL_API_KEY={api_key(backchannel.root)}\n"
        f"BACKCHANNEL_PROFILE={agent.name}\n"
    )
    with (
        ScriptedModel(agent) as model,
        HermesGateway(
            model.base_url,
            api_key=KEY,
            python=hermes_python,
            plugins=["backchannel"],
            files={"SOUL.md": soul, ".env": env},
        ) as hermes,
    ):
        made = run_cli(
            "profile", "create", agent.name, "--engine", "hermes", "--base-url", hermes.url,
            "--api-key-env", "HERMES_KEY",
        )  # fmt: skip
        assert made.exit_code == 0, made.stderr
        yield hermes


def allow(root: Path, profile: str, *patterns: str, max_hops: int = 6) -> None:
    cfg = root / "profiles" / profile / "config.yaml"
    text = cfg.read_text().replace("allow: []", f"allow: {json.dumps(list(patterns))}")
    cfg.write_text(text.replace("max_hops: 6", f"max_hops: {max_hops}"))


def send(address: str, message: str, *extra: str) -> dict[str, Any]:
    sent = run_cli("send", address, message, "--json", *extra)
    assert "Traceback" not in sent.stderr, sent.stderr
    out: dict[str, Any] = json.loads(sent.stdout)
    return out


def ledger(gw: GatewayProcess) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = httpx.get(f"{gw.url}/v1/ledger?limit=500", headers=gw.headers()).json()["data"]
    return data


@pytest.fixture
def key_in_env(initialised: Path) -> Path:
    with (initialised / ".env").open("a") as fh:
        fh.write(f"HERMES_KEY={KEY}\n")
    return initialised


def research_decides(text: str, body: dict[str, Any]) -> Any:
    last = text.splitlines()[-1]
    if last.startswith("ask builds"):
        return call("send_to_session", session_id="builds", message=last.removeprefix("ask builds").strip())
    return f"research noted: {last}"


def builds_decides(text: str, body: dict[str, Any]) -> Any:
    last = text.splitlines()[-1]
    if last.startswith("ask research"):
        return call("send_to_session", session_id="research", message="are you sure?")
    system = next((text_of(m["content"]) for m in body["messages"] if m["role"] == "system"), "")
    history = " | ".join(text_of(m["content"]) for m in body["messages"][1:-1] if m["role"] == "user")
    soul = "BUILDS-SOUL" if "BUILDS-SOUL" in system else "no soul"
    return f"builds answers {last!r} ({soul}; earlier: {history})"


def test_a_hermes_session_asks_another_through_backchannel(
    key_in_env: Path, gateway: GatewayProcess, hermes_python: HermesPython
) -> None:
    research = Agent("research", research_decides)
    builds = Agent("builds", builds_decides)
    with (
        hermes_agent(research, "You are research. RESEARCH-SOUL", gateway, hermes_python),
        hermes_agent(builds, "You are builds. BUILDS-SOUL", gateway, hermes_python) as builds_hermes,
    ):
        # builds' Hermes session has a history of its own.
        first = send("builds", "the codeword is kiwi")
        assert first["result"] == "delivered", first

        # Deny by default: research's tool call is refused, builds' model is never called.
        before = len(builds.bodies)
        refused = send("research", "ask builds what is the build status?")
        assert refused["result"] == "delivered", refused
        assert "not_allowed" in refused["reply"] and refused["reply"].startswith("research got:")
        assert len(builds.bodies) == before

        # Allowed: builds' Hermes session answers in its own context; the reply is research's tool result.
        allow(key_in_env, "research", "builds")
        asked = send("research", "ask builds what is the build status?")
        assert asked["result"] == "delivered", asked
        reply = asked["reply"]
        assert reply.startswith("research got:") and "builds answers 'what is the build status?'" in reply
        assert "BUILDS-SOUL" in reply and "kiwi" in reply  # builds' SOUL.md and its session's earlier turn
        framed = builds.turns_seen()[-1]
        assert framed.startswith("[Message from session research/") and "send_to_session" in framed
        # All of it in builds' one Hermes Bot Chat, over there.
        listing = httpx.get(f"{builds_hermes.url}/api/sessions?limit=200", headers=builds_hermes.headers).json()
        assert [s["title"] for s in listing["data"]] == ["Bot Chat"]

        # A wait that would deadlock (builds asks research back while research waits on builds): at once.
        allow(key_in_env, "builds", "research")
        started = time.monotonic()
        loop = send("research", "ask builds ask research whether this is right")
        assert "would_deadlock" in loop["reply"] and time.monotonic() - started < 30
        assert not any("are you sure?" in t for t in research.turns_seen())  # research was never asked

        states = [(e["sender"].split("/")[0], e["target"].split("/")[0], e["state"]) for e in ledger(gateway)]
        assert ("research", "builds", "refused:not_allowed") in states
        assert ("builds", "research", "refused:would_deadlock") in states
        assert states.count(("research", "builds", "completed")) == 2
        assert states.count(("human:cli", "research", "completed")) == 3
        assert api_key(gateway.root) not in gateway.log()


def ping_pong(name: str, other: str) -> Callable[[str, dict[str, Any]], Any]:
    def decide(text: str, body: dict[str, Any]) -> Any:
        if text.splitlines()[-1] == "ping":
            return call("send_to_session", session_id=other, message="ping", wait_seconds=0)
        return f"{name} done"

    return decide


def test_an_async_ping_pong_stops_at_the_hop_limit(
    key_in_env: Path, gateway: GatewayProcess, hermes_python: HermesPython
) -> None:
    research = Agent("research", ping_pong("research", "builds"))
    builds = Agent("builds", ping_pong("builds", "research"))
    with (
        hermes_agent(research, "research", gateway, hermes_python),
        hermes_agent(builds, "builds", gateway, hermes_python),
    ):
        allow(key_in_env, "research", "builds", max_hops=3)
        allow(key_in_env, "builds", "research", max_hops=3)
        assert send("research", "ping")["result"] == "delivered"
        deadline = time.monotonic() + 90
        while not any(e["state"] == "refused:hop_limit" for e in ledger(gateway)):
            assert time.monotonic() < deadline, ledger(gateway)
            time.sleep(0.5)
        hops = sorted(e["hops"] for e in ledger(gateway) if e["message"] == "ping")
        assert hops == [0, 1, 2, 3, 4], hops  # the person's, three sends, and the refused fourth
        refused = [e for e in ledger(gateway) if e["state"] == "refused:hop_limit"]
        assert len(refused) == 1 and refused[0]["hops"] == 4


def test_concurrent_messages_to_one_hermes_session_go_in_order(
    key_in_env: Path, gateway: GatewayProcess, hermes_python: HermesPython
) -> None:
    builds = Agent("builds", lambda text, body: f"done {text.splitlines()[-1]}", delay=0.4)
    with hermes_agent(builds, "builds", gateway, hermes_python) as hermes:
        # Hermes alone: three requests at once on one session run side by side on 0.19; later Hermes leases a
        # session's turns itself (in its state.db), so there they wait for each other.
        sid = httpx.post(f"{hermes.url}/api/sessions", json={"title": "direct"}, headers=hermes.headers).json()
        sid = sid["session"]["id"]

        def direct(n: int) -> None:
            httpx.post(
                f"{hermes.url}/api/sessions/{sid}/chat", json={"message": f"d{n}"}, headers=hermes.headers, timeout=60
            )

        threads = [threading.Thread(target=direct, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert builds.most_active > 1 if hermes_python is HERMES_19 else builds.most_active == 1

        # Through Backchannel: queued on the session, one turn at a time, in the order they came.
        builds.most_active = 0
        bot = httpx.post(f"{gateway.url}/p/builds/api/sessions", json={"title": "Bot Chat"}, headers=gateway.headers())
        session_id = bot.json()["session"]["id"]
        runs = [
            httpx.post(
                f"{gateway.url}/p/builds/v1/runs",
                json={"input": f"m{n}", "session_id": session_id},
                headers=gateway.headers(),
            ).json()["run_id"]
            for n in range(3)
        ]
        for run_id in runs:
            deadline = time.monotonic() + 60
            while (
                httpx.get(f"{gateway.url}/v1/runs/{run_id}", headers=gateway.headers()).json()["status"] != "completed"
            ):
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert builds.most_active == 1
        assert [t.splitlines()[-1] for t in builds.turns_seen()[-3:]] == ["m0", "m1", "m2"]


def test_a_hermes_turn_cut_by_a_sigkilled_gateway_is_answered_once(
    key_in_env: Path, gateway_process: GatewayProcess, hermes_python: HermesPython
) -> None:
    """The restarted gateway takes the cut turn's own answer as the run's reply, never sending it again: Hermes has
    one user message and one turn, Backchannel one copy of each. On 0.19 the cut turn runs on and is saved, and the
    answer is read from the session; 0.22 would interrupt a turn whose stream client is gone, so there the turn is a
    Hermes run keyed by Backchannel's run, which the restarted gateway finds again under the same key."""
    gateway = gateway_process  # a process of its own: it is SIGKILLed
    release = threading.Event()

    def slow(text: str, body: dict[str, Any]) -> Any:
        release.wait(60)
        # Streamed over a second or so: Hermes writes its deltas to the cut stream while the turn still runs
        # (0.22 notices a gone client only when a write fails; a burst at the end would race the turn's end).
        return {"content": f"built: {text.splitlines()[-1]}", "chunk_delay": 0.3}

    builds = Agent("builds", slow)
    with hermes_agent(builds, "builds", gateway, hermes_python) as hermes:
        bot = httpx.post(f"{gateway.url}/p/builds/api/sessions", json={"title": "Bot Chat"}, headers=gateway.headers())
        session_id = bot.json()["session"]["id"]
        started = httpx.post(
            f"{gateway.url}/p/builds/v1/runs",
            json={"input": "compile the kernel", "session_id": session_id},
            headers=gateway.headers(),
        )
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 30
        while not builds.bodies:  # the turn is in Hermes, its model thinking
            assert time.monotonic() < deadline, gateway.log()
            time.sleep(0.05)
        gateway.kill()
        gateway.start()  # before Hermes is done: the restarted gateway waits for the cut turn's answer
        time.sleep(1.0)
        release.set()

        deadline = time.monotonic() + 60
        while (run := httpx.get(f"{gateway.url}/v1/runs/{run_id}", headers=gateway.headers()).json())["status"] not in (
            "completed",
            "failed",
        ):
            assert time.monotonic() < deadline, run
            time.sleep(0.2)
        assert run["status"] == "completed", run
        assert run["output"] == "built: compile the kernel" and run["attempts"] == 2, run
        time.sleep(1.0)  # a second turn, were one sent, would have reached the model by now

        # Hermes: the message once, answered once; its model called once.
        assert builds.turns_seen() == ["compile the kernel"]
        listing = httpx.get(f"{hermes.url}/api/sessions?limit=200", headers=hermes.headers).json()["data"]
        assert [s["title"] for s in listing] == ["Bot Chat"]
        there = httpx.get(f"{hermes.url}/api/sessions/{listing[0]['id']}/messages", headers=hermes.headers).json()
        assert [(m["role"], m["content"]) for m in there["data"]] == [
            ("user", "compile the kernel"),
            ("assistant", "built: compile the kernel"),
        ]
        # Backchannel: one run (answered in its second attempt), one copy of message and reply, one ledger entry.
        here = httpx.get(f"{gateway.url}/p/builds/api/sessions/{session_id}/messages", headers=gateway.headers())
        assert [(m["role"], m["content"]) for m in here.json()["data"]] == [
            ("user", "compile the kernel"),
            ("assistant", "built: compile the kernel"),
        ]
        entries = [e for e in ledger(gateway) if e["message"] == "compile the kernel"]
        assert [e["state"] for e in entries] == ["completed"], entries


def test_a_stop_here_stops_the_turn_in_hermes_where_hermes_keeps_runs(
    key_in_env: Path, gateway: GatewayProcess, hermes_python: HermesPython
) -> None:
    """Stopping a run whose Hermes turn is thinking: on 0.22 Hermes stops that turn too (its run is stopped), so
    the session is free at once for the next message and the stopped turn's answer never appears there. Hermes 0.19
    has no stop for a session's turn: there it runs on and its answer is saved over there, not here."""
    release = threading.Event()

    def held(text: str, body: dict[str, Any]) -> Any:
        last = text.splitlines()[-1]
        if last == "the long job":
            release.wait(60)
        return f"built: {last}"

    builds = Agent("builds", held)
    with hermes_agent(builds, "builds", gateway, hermes_python) as hermes:
        bot = httpx.post(f"{gateway.url}/p/builds/api/sessions", json={"title": "Bot Chat"}, headers=gateway.headers())
        session_id = bot.json()["session"]["id"]

        def start(text: str) -> str:
            made = httpx.post(
                f"{gateway.url}/p/builds/v1/runs", json={"input": text, "session_id": session_id},
                headers=gateway.headers(),
            )  # fmt: skip
            run_id: str = made.json()["run_id"]
            return run_id

        def ended(run_id: str, seconds: float) -> dict[str, Any]:
            deadline = time.monotonic() + seconds
            while (run := httpx.get(f"{gateway.url}/v1/runs/{run_id}", headers=gateway.headers()).json())[
                "status"
            ] not in ("completed", "failed", "cancelled"):
                assert time.monotonic() < deadline, run
                time.sleep(0.2)
            return run

        long_run = start("the long job")
        deadline = time.monotonic() + 30
        while not builds.bodies:  # the turn is in Hermes, its model thinking
            assert time.monotonic() < deadline, gateway.log()
            time.sleep(0.05)
        stopped = httpx.post(f"{gateway.url}/v1/runs/{long_run}/stop", headers=gateway.headers())
        assert stopped.status_code == 200, stopped.text
        assert ended(long_run, 20)["status"] == "cancelled"

        quick = ended(start("a quick one"), 20)  # long before the held turn would let its session go (60 s)
        assert quick["status"] == "completed" and quick["output"] == "built: a quick one", quick
        release.set()
        time.sleep(1.5)  # the held model call returns: a turn still running would save its answer now

        listing = httpx.get(f"{hermes.url}/api/sessions?limit=200", headers=hermes.headers).json()["data"]
        there = httpx.get(f"{hermes.url}/api/sessions/{listing[0]['id']}/messages", headers=hermes.headers).json()
        answers = [m["content"] for m in there["data"] if m["role"] == "assistant" and m["content"]]
        if hermes_python is HERMES_19:
            assert "built: the long job" in answers, answers
        else:
            assert "built: the long job" not in answers and "built: a quick one" in answers, answers
        here = httpx.get(f"{gateway.url}/p/builds/api/sessions/{session_id}/messages", headers=gateway.headers())
        assert "built: the long job" not in [m["content"] for m in here.json()["data"]]


def test_send_to_session_reaches_a_hermes_session_backchannel_never_imported(
    key_in_env: Path, gateway: GatewayProcess, hermes_python: HermesPython
) -> None:
    hermes_id = "20260801_110135_3a75b0"  # the seed's: a session made in builds' Hermes, unknown here

    def research(text: str, body: dict[str, Any]) -> Any:
        return call("send_to_session", session_id=hermes_id, message=text.splitlines()[-1])

    builds = Agent("builds", builds_decides)
    with (
        hermes_agent(Agent("research", research), "research", gateway, hermes_python),
        hermes_agent(builds, "BUILDS-SOUL", gateway, hermes_python) as builds_hermes,
    ):
        made = httpx.post(
            f"{builds_hermes.url}/api/sessions",
            json={"id": hermes_id, "title": "pricing"},
            headers=builds_hermes.headers,
        )
        assert made.status_code == 201, made.text
        allow(key_in_env, "research", f"builds/{hermes_id}")
        asked = send("research", "what did pricing find?")
        assert asked["result"] == "delivered", asked
        assert "builds answers 'what did pricing find?'" in asked["reply"], asked
        there = httpx.get(f"{builds_hermes.url}/api/sessions/{hermes_id}/messages", headers=builds_hermes.headers)
        assert [m["role"] for m in there.json()["data"]] == ["user", "assistant"]  # the turn ran in that session
        listed = json.loads(run_cli("sessions", "list", "-p", "builds", "--json").stdout)
        assert [s["id"] for s in listed] == [hermes_id]  # imported under its Hermes id, nothing else made

        # An id that neither Backchannel nor builds' Hermes knows: a not_found tool result.
        hermes_id = "20260801_999999_000000"
        missing = send("research", "anyone?")
        assert "not_found" in missing["reply"] and "no such session" in missing["reply"], missing
