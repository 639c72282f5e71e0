"""Several gateways on one PostgreSQL store are one gateway (DESIGN section 10, issue 24).

Each gateway has a home of its own, deployed alike (the same config.yaml with the same gateway id, the same .env
with the person's key, the same profiles), whose `store.url` names one database of the tests' throwaway cluster
(its password in .env). What one gateway's turn writes, another reads; a sender waiting on one gets the reply
another's turn wrote; a gateway killed mid-turn loses the turn to another after its lease, and one paused past
its lease cannot write a second reply (the claim's fencing token). The process tests kill and pause real
`backchannel gateway` processes; the in-process ones run two gateways in one event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.addresses import LocalAddress
from backchannel.core.delivery.admission import Attempt
from backchannel.core.gateway import Gateway
from backchannel.errors import ConfigError, LimitReached
from backchannel.events import Chunk, Ended, Step
from backchannel.home import config
from backchannel.records import Session
from backchannel.states import RunState
from backchannel.store import runs as runstore
from backchannel.store.runs import NewRun
from conftest import GatewayProcess, api_key, free_port, run_cli, use_shared_store
from polling import eventually
from test_bad_files import run_gateway

LEASE_SECONDS = 2.0  # short, so a lost gateway's turn moves on within a test's patience
DEADLINE = 60.0

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and SIGSTOP are POSIX signals")


def deploy(first: Path, second: Path, url: str, *, lease: float = LEASE_SECONDS) -> None:
    """Point `first` (an initialised home) at the store, and make `second` its copy: the same files, no state.db."""
    use_shared_store(first, url)
    path = config.config_path(first)
    data = config.load_yaml(path)
    data["store"]["lease_seconds"] = lease
    config.write_yaml(path, data)
    shutil.copytree(first, second, ignore=shutil.ignore_patterns("state.db*", "gateway*.json", "*.log", "*.lock"))


@pytest.fixture
def homes(initialised: Path, postgres_url: str, tmp_path: Path) -> tuple[Path, Path]:
    other = tmp_path / "second-home"
    deploy(initialised, other, postgres_url)
    return initialised, other


def on_both(homes: tuple[Path, Path], body: Any, **options: Any) -> None:
    """Run `body(a, b)` against two started in-process gateways, one per home, in one event loop."""

    async def main() -> None:
        a, b = (Gateway(root, **options.get(name, {})) for root, name in zip(homes, ("a", "b"), strict=True))
        await a.start()
        try:
            await b.start()
            try:
                await body(a, b)
            finally:
                await b.stop(grace=1)
        finally:
            await a.stop(grace=1)

    asyncio.run(main())


# --- one gateway in two processes' eyes ------------------------------------------------------------------


def test_a_session_moves_between_gateways_with_everything_it_said(homes: tuple[Path, Path]) -> None:
    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")
        first = await a.delivery.deliver(Attempt.handed_in(chat, "hello from a", "human:api"), wait=20)
        assert first.result.reply == "default (echo): hello from a"
        seen = await b.directory.session(chat.id)  # the same session, read through the other gateway
        second = await b.delivery.deliver(Attempt.handed_in(seen, "and from b", "human:api"), wait=20)
        assert second.result.reply == "default (echo): and from b"
        said = [m.content for m in await a.directory.messages(chat.id)]
        assert said == ["hello from a", "default (echo): hello from a", "and from b", "default (echo): and from b"]
        assert {e.run_id for e in await b.delivery.ledger("default")} == {first.run.id, second.run.id}

    on_both(homes, body)


def test_a_bot_chat_one_gateway_sets_aside_stops_being_the_profiles_bot_chat_on_the_other(
    homes: tuple[Path, Path],
) -> None:
    """A gateway keeps the sessions it admitted messages to (no read per message); another gateway's removal of the
    profile, which retitles its Bot Chat, is heard from the store's notice, not after the kept entry's age."""

    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")
        bot = LocalAddress(profile="default")
        assert (await b.directory.resolve(bot)).id == chat.id  # kept by b from here on
        await a.directory.retire_bot_chat("default", mark="test")
        started = time.monotonic()
        while (await b.directory.find(bot))[1] is not None:
            assert time.monotonic() - started < 5, "b still takes the set-aside session for default's Bot Chat"
            await asyncio.sleep(0.02)

    on_both(homes, body)


def test_a_sender_waiting_on_one_gateway_gets_the_reply_another_gateways_turn_wrote(homes: tuple[Path, Path]) -> None:
    """`a` runs no turns (`runs_turns=False`): `b` runs the turn, and `a`'s waiter hears of
    its end through the store's notice, long before a waiter's own poll would look."""

    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")
        started = time.monotonic()
        done = await a.delivery.deliver(Attempt.handed_in(chat, "/sleep 0.3\nworked elsewhere", "human:api"), wait=20)
        assert done.run.state is RunState.COMPLETED and done.result.reply == "default (echo): worked elsewhere"
        assert done.run.attempts == 1
        assert time.monotonic() - started < 20
        run = await b.delivery.run(done.run.id)
        assert run.state is RunState.COMPLETED

    on_both(homes, body, a={"runs_turns": False})


def test_a_waiter_hears_of_an_end_another_gateway_committed_from_its_notice_not_from_a_poll(
    homes: tuple[Path, Path],
) -> None:
    """`a` looks at the store on its own only every minute (`poll_seconds`) and its waiter re-reads the run only at
    its wait's end (30 s): its answer within a few seconds of a 0.3 s turn can only come from `b`'s notice."""

    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")
        started = time.monotonic()
        done = await a.delivery.deliver(Attempt.handed_in(chat, "/sleep 0.3\ntold at once", "human:api"), wait=30)
        assert done.run.state is RunState.COMPLETED and done.result.reply == "default (echo): told at once"
        assert time.monotonic() - started < 15, "a's waiter was answered by its own deadline, not by b's notice"

    on_both(homes, body, a={"runs_turns": False, "poll_seconds": 60.0})


def test_a_message_steered_through_one_gateway_joins_the_turn_another_gateway_runs(homes: tuple[Path, Path]) -> None:
    """`b` runs the turn; the steer recorded through `a` reaches it by the store's notice alone (a turn looks for
    messages to steer only when told of one): one turn answers both, with the steered message's reply."""

    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")
        first = await a.delivery.submit(Attempt.handed_in(chat, "/sleep 1.5\nfirst", "human:api"))
        deadline = time.monotonic() + 10
        while (await a.delivery.run(first.run.id)).state is not RunState.RUNNING:
            assert time.monotonic() < deadline, "the turn never started on b"
            await asyncio.sleep(0.02)
        steered = await a.delivery.deliver(Attempt.handed_in(chat, "also this", "human:api", steer=True), wait=20)
        assert steered.run.landed == "steered" and steered.result.reply == "default (echo): also this"
        turn = await a.delivery.wait(first.run.id, 20)
        assert turn.result.reply == "default (echo): also this", "the running turn on b read the steered message"

    on_both(homes, body, a={"runs_turns": False})


def test_a_follower_on_one_gateway_sees_the_end_of_a_run_another_gateway_ran(homes: tuple[Path, Path]) -> None:
    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")
        sent = await a.delivery.submit(Attempt.handed_in(chat, "/sleep 0.5\nfollowed", "human:api"))
        ended = [step async for step in a.delivery.watch(sent.run.id, 20, tick=5.0)][-1]
        assert isinstance(ended, Ended) and ended.output == "default (echo): followed"
        assert (await a.delivery.status(sent.run.id)).result.reply == "default (echo): followed"

    on_both(homes, body, a={"runs_turns": False})


def test_a_home_whose_gateway_id_is_not_the_stores_is_refused(homes: tuple[Path, Path]) -> None:
    first, second = homes
    path = config.config_path(second)
    data = config.load_yaml(path)
    data["gateway"]["id"] = "gw-another"
    config.write_yaml(path, data)

    async def main() -> None:
        a = Gateway(first)
        await a.open()
        await a.aclose()  # the store now names a's id
        b = Gateway(second)
        with pytest.raises(ConfigError, match="belongs to gateway") as refused:
            await b.open()
        owner = config.load_gateway_config(first).gateway_id
        assert f"id: {owner}" in refused.value.message and "password" not in refused.value.message.lower()

    asyncio.run(main())


def test_a_store_url_with_a_password_in_config_is_refused(initialised: Path) -> None:
    path = config.config_path(initialised)
    data = config.load_yaml(path)
    data["store"] = {"url": "postgresql://bc:secret@127.0.0.1:5432/bc"}
    config.write_yaml(path, data)
    with pytest.raises(ConfigError, match="BACKCHANNEL_STORE_PASSWORD") as refused:
        config.load_gateway_config(initialised)
    assert "store.url" in refused.value.message and "secret" not in refused.value.message


# --- a gateway lost mid-turn -------------------------------------------------------------------------------


@pytest.fixture
def two_processes(homes: tuple[Path, Path]) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    first, second = (GatewayProcess(root, free_port()) for root in homes)
    try:
        first.start()
        second.start()
        yield first, second
    finally:
        for gw in (first, second):
            if gw.proc is not None and gw.proc.poll() is None:
                os.kill(gw.proc.pid, signal.SIGCONT)  # a paused one must be able to stop
            gw.close()


def _start_run(gw: GatewayProcess, text: str) -> str:
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=20) as c:
        started = c.post("/v1/runs", json={"input": text})
        assert started.status_code == 202, started.text
        run_id: str = started.json()["run_id"]
        return run_id


def _run(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=20) as c:
        found = c.get(f"/v1/runs/{run_id}")
        assert found.status_code == 200, found.text
        data: dict[str, Any] = found.json()
        return data


def _until(gw: GatewayProcess, run_id: str, states: set[str]) -> dict[str, Any]:
    return eventually(
        lambda: _run(gw, run_id),
        lambda data: data.get("status") in states,
        within=DEADLINE,
        what=lambda _: f"run {run_id} never reached {states}:\n{gw.log()[-3000:]}",
    )


def _replies(gw: GatewayProcess, text: str) -> list[str]:
    """The assistant messages of the default profile's sessions answering `text`."""
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=20) as c:
        sessions = c.get("/api/sessions").json()["data"]
        said: list[str] = []
        for s in sessions:
            messages = c.get(f"/api/sessions/{s['id']}/messages").json()["data"]
            said += [m["content"] for m in messages if m["role"] == "assistant" and text in (m["content"] or "")]
        return said


@posix_only
def test_the_turn_of_a_killed_gateway_is_finished_by_the_other_once(
    two_processes: tuple[GatewayProcess, GatewayProcess],
) -> None:
    first, second = two_processes
    run_id = _start_run(first, "/sleep 1\nwork of the lost one")
    _until(second, run_id, {"running"})  # claimed (by the gateway it was handed to: `first`, idle)
    assert first.proc is not None
    first.kill()  # SIGKILL: no requeue at shutdown; its lease runs out
    done = _until(second, run_id, {"completed", "failed"})
    assert done["status"] == "completed" and done["output"] == "default (echo): work of the lost one"
    assert _replies(second, "work of the lost one") == ["default (echo): work of the lost one"]


@posix_only
def test_the_turn_of_a_killed_gateway_is_taken_up_when_its_store_connection_ends_not_when_its_lease_does(
    initialised: Path, postgres_url: str, tmp_path: Path
) -> None:
    second_home = tmp_path / "second-home"
    deploy(initialised, second_home, postgres_url, lease=600.0)  # leases renewed every 200 s: they cannot free it
    first, second = GatewayProcess(initialised, free_port()), GatewayProcess(second_home, free_port())
    try:
        first.start()
        second.start()
        run_id = _start_run(first, "/sleep 1\nwork of the one that died")
        _until(second, run_id, {"running"})
        assert first.proc is not None
        first.kill()  # its lease holds for 10 minutes; its liveness lock goes with its connections
        done = _until(second, run_id, {"completed", "failed"})
        assert done["status"] == "completed" and done["output"] == "default (echo): work of the one that died"
        assert f"run {run_id} requeued at once: the gateway that ran its turn has ended" in second.log()
        assert _replies(second, "work of the one that died") == ["default (echo): work of the one that died"]
    finally:
        first.close()
        second.close()


@posix_only
def test_a_paused_gateway_past_its_lease_cannot_write_a_second_reply(
    two_processes: tuple[GatewayProcess, GatewayProcess],
) -> None:
    first, second = two_processes
    assert first.proc is not None
    run_id = _start_run(first, "/sleep 2\npaused work")
    _until(second, run_id, {"running"})
    os.kill(first.proc.pid, signal.SIGSTOP)  # alive, silent: only its lease tells the other it is gone
    try:
        done = _until(second, run_id, {"completed", "failed"})
    finally:
        os.kill(first.proc.pid, signal.SIGCONT)
    assert done["status"] == "completed"
    deadline = time.monotonic() + DEADLINE  # the resumed gateway ends its own copy of the turn, and is refused
    while "no longer ours to finish" not in first.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "no longer ours to finish" in first.log(), first.log()[-3000:]
    assert _replies(second, "paused work") == ["default (echo): paused work"]
    assert _run(first, run_id)["output"] == "default (echo): paused work"
    assert api_key(first.root) == api_key(second.root)  # one gateway: one person's key


def test_what_a_turn_on_one_gateway_remembers_a_turn_on_another_knows(homes: tuple[Path, Path]) -> None:
    def memory(action: str, content: str) -> str:
        return "/tool memory " + json.dumps({"action": action, "target": "memory", "content": content})

    chats: dict[str, Session] = {}  # each gateway's turns in a session of its own: turns run where it is owned

    async def tool_result(gw: Gateway, text: str) -> dict[str, Any]:
        if gw.queue.owner not in chats:
            chats[gw.queue.owner] = (await gw.directory.create_session("default", title=gw.queue.owner))[0]
        chat = chats[gw.queue.owner]
        done = await gw.delivery.deliver(Attempt.handed_in(chat, text, "human:api", key=f"k-{time.time_ns()}"), wait=20)
        assert done.run.state is RunState.COMPLETED and not done.result.replayed, done
        said = [m for m in await gw.directory.messages(chat.id) if m.role == "tool"]
        result: dict[str, Any] = json.loads(said[-1].content)
        return result

    async def body(a: Gateway, b: Gateway) -> None:
        added = await tool_result(a, memory("add", "the build is green"))
        assert added["ok"] and added["entries"] == 1
        again = await tool_result(b, memory("add", "the build is green"))  # b's turn sees what a's wrote
        assert again == {
            "result": "delivered",
            "ok": True,
            "target": "memory",
            "note": "already remembered",
            "entries": 1,
        }
        await tool_result(b, memory("add", "deploys on fridays are off"))
        notes = await a.turns.memories.notes(a.directory.profile("default"))
        assert notes is not None and notes.memory == "the build is green\ndeploys on fridays are off\n"

    on_both(homes, body)
    first, second = homes
    # The files are an export, written by the gateway that changed the text last.
    assert (second / "profiles" / "default" / "memories" / "MEMORY.md").read_text() == (
        "the build is green\ndeploys on fridays are off\n"
    )
    assert (first / "profiles" / "default" / "memories" / "MEMORY.md").read_text() == "the build is green\n"


@posix_only
def test_a_peer_at_two_urls_is_answered_once_when_the_gateway_it_asked_dies_mid_request(
    two_processes: tuple[GatewayProcess, GatewayProcess], tmp_path: Path
) -> None:
    """Another home knows the two gateways as one peer (`peer add team --url A --url B`). Its message reaches A,
    A records the run and starts the turn, and A is killed before it answers: the peer client asks B with the same
    key, B answers for the run A accepted (it reclaims the turn once A's lease is gone), and the turn's reply is
    saved once."""
    first, second = two_processes
    made = run_cli("key", "create", "caller", "--json", env={"BACKCHANNEL_HOME": str(first.root)})
    assert made.exit_code == 0, made.stderr
    peer_key = json.loads(made.stdout)["key"]  # kept in the shared store: B knows it too
    caller = tmp_path / "caller-home"
    env = {"BACKCHANNEL_HOME": str(caller)}
    assert run_cli("init", env=env).exit_code == 0
    added = run_cli(
        "peer", "add", "team", "--url", first.url, "--url", second.url, "--key", peer_key, "--no-key-back", env=env
    )
    assert added.exit_code == 0, added.stderr
    dm = subprocess.Popen(
        [sys.executable, "-m", "backchannel", "peer", "dm", "team", "/sleep 2\nasked once", "--wait", "60", "--json"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        running = None
        while running is None and time.monotonic() < deadline:
            with httpx.Client(base_url=second.url, headers=second.headers(), timeout=20) as c:
                runs = c.get("/v1/ledger").json()["data"]
            running = next((r for r in runs if r["message"].endswith("asked once") and r["state"] == "running"), None)
            time.sleep(0.05)
        assert running is not None, first.log()[-3000:]
        first.kill()
        out, err = dm.communicate(timeout=DEADLINE)
    finally:
        if dm.poll() is None:
            dm.kill()
    assert dm.returncode == 0, err.decode()
    answer = json.loads(out)
    assert answer["result"] == "delivered" and answer["reply"] == "default (echo): asked once", answer
    assert _replies(second, "asked once") == ["default (echo): asked once"]
    later = run_cli("peer", "dm", "team", "asked later", "--json", env=env)  # A is down: nothing reaches it, B answers
    assert later.exit_code == 0, later.stderr
    assert json.loads(later.stdout)["reply"] == "default (echo): asked later"


def test_a_senders_rate_is_counted_across_the_gateways(homes: tuple[Path, Path]) -> None:
    for root in homes:
        path = config.config_path(root)
        data = config.load_yaml(path)
        data["gateway"]["max_runs_per_sender_per_minute"] = 3
        config.write_yaml(path, data)

    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")

        async def arrive(gw: Gateway, n: int) -> None:
            await gw.delivery.submit(Attempt.handed_in(chat, f"ping {n}", "peer:spark/default", key=f"k-{n}"))

        for n, gw in enumerate((a, b, a)):  # three runs, split over the two gateways: the minute is full
            await arrive(gw, n)
        with pytest.raises(LimitReached, match="in the last minute") as refused:
            await arrive(b, 3)  # b admitted one itself, yet the sender's minute is full
        assert refused.value.code == "rate_limited" and refused.value.retry_after is not None
        assert len(await a.delivery.runs(session_id=chat.id)) == 3  # nothing was recorded for the refused one

    on_both(homes, body, a={"runs_turns": False}, b={"runs_turns": False})


@pytest.mark.parametrize("fault", ["wrong password", "nothing listens", "another gateway's store"])
def test_a_store_that_cannot_be_used_stops_the_gateway_at_once(
    homes: tuple[Path, Path], postgres_cluster: Any, fault: str
) -> None:
    """Said once, in one line naming the store without its password, before the gateway says it listens: exit 2;
    the command-line commands and doctor say the same."""
    root = homes[0]
    password = config.read_env(root)["BACKCHANNEL_STORE_PASSWORD"]
    if fault == "wrong password":
        config.set_env_value(root, "BACKCHANNEL_STORE_PASSWORD", "not-the-password")
        expected = "password"
    elif fault == "nothing listens":
        path = config.config_path(root)
        data = config.load_yaml(path)
        data["store"]["url"] = data["store"]["url"].replace(f":{postgres_cluster.port}/", f":{free_port()}/")
        config.write_yaml(path, data)
        expected = "cannot be reached"
    else:
        on_both(homes, lambda a, b: asyncio.sleep(0))  # the store now holds their gateway id
        path = config.config_path(root)
        data = config.load_yaml(path)
        data["gateway"]["id"] = "gw-another"
        config.write_yaml(path, data)
        expected = "belongs to gateway"
    code, output, _took = run_gateway(root)
    assert code == 2, output
    assert expected in output and "Traceback" not in output and "listening" not in output, output
    assert password not in output and "not-the-password" not in output
    sent = run_cli("send", "default", "hello", env={"BACKCHANNEL_HOME": str(root)})
    assert sent.exit_code == 2 and expected in sent.stderr and "Traceback" not in sent.stderr, sent
    doctor = run_cli("doctor", "--json", env={"BACKCHANNEL_HOME": str(root)})
    store = next(c for c in json.loads(doctor.stdout)["checks"] if c["check"] == "store")
    assert doctor.exit_code == 1 and store["status"] == "fail" and expected in store["detail"], store


def test_doctor_tells_of_turns_left_running_by_a_gateway_whose_lease_ran_out(homes: tuple[Path, Path]) -> None:
    root = homes[0]

    async def stall() -> None:
        gw = Gateway(root)
        await gw.open()
        try:
            chat = await gw.directory.open_bot_chat("default")
            new = NewRun(sender="human:api", profile="default", session_id=chat.id, message="x", idempotency_key="k")
            await runstore.record(gw.db, new, claim_for="elsewhere:1:gone", lease_seconds=-1)  # a lapsed claim
        finally:
            await gw.aclose()

    asyncio.run(stall())
    found = run_cli("doctor", "--json", env={"BACKCHANNEL_HOME": str(root)})
    store = next(c for c in json.loads(found.stdout)["checks"] if c["check"] == "store")
    assert store["status"] == "warn" and "1 turn left running by a gateway" in store["detail"], store
    assert "1 run, 0 turns running under a live lease" in store["detail"], store
    assert "start a gateway" in store["fix"]


def test_a_follower_on_one_gateway_sees_the_live_events_of_a_turn_another_gateway_runs(
    homes: tuple[Path, Path],
) -> None:
    """`a` runs no turns (the turn runs on `b`): its watcher gets `b`'s tool steps and reply text as they
    happen, relayed through the store's notices, not only the end read from the store."""

    async def body(a: Gateway, b: Gateway) -> None:
        chat = await a.directory.open_bot_chat("default")
        asked = Attempt.handed_in(chat, "/sleep 0.5\n/remember a relayed note\nseen live", "human:api")
        sent = await a.delivery.submit(asked)
        steps = [step async for step in a.delivery.watch(sent.run.id, 20, tick=5.0)]
        tools = [s for s in steps if isinstance(s, Step)]
        chunks = "".join(s.text for s in steps if isinstance(s, Chunk))
        assert [(s.name, s.tool) for s in tools] == [("tool.started", "memory"), ("tool.completed", "memory")], steps
        assert "seen live" in chunks, steps
        assert isinstance(steps[-1], Ended) and steps[-1].state == "completed"
        assert (await b.delivery.run(sent.run.id)).state is RunState.COMPLETED

    on_both(homes, body, a={"runs_turns": False})
