"""Deadlines on the wait chain (issue 44): a send's deadline travels with it, and each agent's send inherits it.

Through the real CLI, this home's gateway and another home's gateway (peer `spark`): the person's `--deadline 10m`
to research, research's send to builds and builds' send to spark's agent share one clock, each hop's a little
earlier (`deadlines.reserve`); a queued message whose deadline passes behind a long turn is never started, it
expires (`deadline_passed`) and its sender, an agent or the person, is told so; a turn still running at its deadline
is stopped as `runs stop` stops it, and its frame told it when. The echo engine's `/sleep` keeps a turn running;
deadlines are a second or two, never a long sleep.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel import deadlines
from conftest import GatewayThread, run_cli
from gateway_http import client, gateway_with, other_home, set_messaging
from polling import eventually


def cli(root: Path, *args: str) -> Any:
    return run_cli(*args, env={"BACKCHANNEL_HOME": str(root)})


def sent(*args: str) -> dict[str, Any]:
    done = run_cli("send", *args, "--json")
    assert done.exit_code in (0, 1), done.stderr
    return dict(json.loads(done.stdout))


def shown(run_id: str) -> dict[str, Any]:
    return dict(json.loads(run_cli("runs", "show", run_id, "--json").stdout))


def ledger(root: Path) -> list[dict[str, Any]]:
    done = cli(root, "ledger", "--json", "--limit", "1000")
    assert done.exit_code == 0, done.stderr
    return list(json.loads(done.stdout))


def tool_call(tool: str, **arguments: Any) -> str:
    """An echo agent's line that calls `tool` with these arguments."""
    return f"/tool {tool} {json.dumps(arguments)}"


@pytest.fixture(params=["hermes-dialect", "a2a"])
def spark(request: pytest.FixtureRequest, initialised: Path, tmp_path: Path) -> Iterator[GatewayThread]:
    """Another home's gateway, known here as peer `spark` (over the Hermes dialect or A2A)."""
    with other_home(tmp_path / "spark") as gw:
        key = json.loads(cli(gw.root, "key", "create", "home", "--profile", "*", "--json").stdout)["key"]
        url = f"{gw.url}/.well-known/agent-card.json" if request.param == "a2a" else gw.url
        added = run_cli("peer", "add", "spark", "--url", url, "--key", key, "--no-key-back")
        assert added.exit_code == 0, added.stderr
        yield gw


def test_a_deadline_is_inherited_across_two_local_agents_and_a_peer(initialised: Path, spark: GatewayThread) -> None:
    """person --deadline 10m → research → builds → peer:spark: every hop carries a deadline, each no later than the
    one before it and at most its reserve earlier, and every hop is answered in time."""
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "research", allow=["builds"])
    set_messaging(initialised, "builds", allow=["peer:spark"])
    before = time.time()
    with gateway_with(initialised):
        done = sent("research", "/send builds /peer spark is the release blocked?", "--deadline", "10m")
    assert done["result"] == "delivered", done
    assert "default (echo): is the release blocked?" in done["reply"]  # spark's agent answered, down the chain
    ours = {e["target"].partition("/")[0]: e for e in ledger(initialised) if e["kind"] == "run"}
    [theirs] = [e for e in ledger(spark.root) if e["kind"] == "run"]
    first, second, third = ours["research"]["deadline"], ours["builds"]["deadline"], theirs["deadline"]
    assert before + 600 <= first <= time.time() + 600  # the person's 10 minutes, as an absolute time
    assert first - deadlines.RESERVE_MOST <= second < first  # research keeps a reserve to use builds' answer
    assert second - deadlines.RESERVE_MOST <= third < second  # across the peer, the same clock, shortened again
    assert {ours["research"]["state"], ours["builds"]["state"], theirs["state"]} == {"completed"}
    # The run's own record says its deadline too (runs show, the API's run).
    assert shown(ours["builds"]["run_id"])["deadline"] == second


def test_a_queued_message_past_its_deadline_expires_unstarted_and_its_agent_sender_is_woken(
    initialised: Path,
) -> None:
    """research sends to builds without waiting, with a deadline 1.5 s away, while builds runs a long turn: the
    message is never started, it ends `expired` (deadline_passed), and research is woken with that outcome."""
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "research", allow=["builds"])
    with gateway_with(initialised):
        busy = sent("builds", "/sleep 30\nthe long one", "--wait", "0")
        eventually(lambda: shown(busy["run_id"])["state"] == "running", within=30, what="builds' long turn")
        send = tool_call("send_to_session", session_id="builds", message="in time?", wait_seconds=0, deadline=1.5)
        asked = sent("research", send)
        assert asked["result"] == "delivered", asked  # research's own turn: it got a receipt, and ended
        expired = eventually(
            lambda: [e for e in ledger(initialised) if e["message"] == "in time?"],
            lambda found: bool(found) and found[0]["state"] == "expired",
            within=30,
            what="the queued message to expire",
        )[0]
        assert expired["started_at"] is None  # never started: the long turn was still running
        assert expired["outcome"] == "failed" and "deadline passed" in expired["reason"], expired
        assert shown(expired["run_id"])["error"]["code"] == "deadline_passed"
        woken = eventually(
            lambda: [e for e in ledger(initialised) if e["target"].startswith("research/") and e["hops"] > 0],
            within=30,
            what="research woken with the outcome",
        )
        said = woken[0]["message"]  # the wake-up's text: which message, and what became of it
        assert "(expired: its deadline passed" in said and "in time?" in said and "unknown" not in said, said
        assert shown(busy["run_id"])["state"] == "running"  # FIFO kept: the turn ahead was not disturbed


def test_the_persons_queued_message_expires_at_its_deadline_and_says_so(initialised: Path) -> None:
    """The person waits on a message queued behind a long turn: at its deadline the wait ends with `failed`,
    `deadline_passed` (exit 1), not a receipt nor unknown; the API refuses a deadline that is not a time."""
    assert run_cli("profile", "create", "builds").exit_code == 0
    with gateway_with(initialised) as gw:
        busy = sent("builds", "/sleep 30\nthe long one", "--wait", "0")
        eventually(lambda: shown(busy["run_id"])["state"] == "running", within=30, what="builds' long turn")
        started = time.monotonic()
        late = run_cli("send", "builds", "after it", "--deadline", "1s", "--wait", "30", "--json")
        assert time.monotonic() - started < 20  # ended at the deadline, not at the end of the wait
        said = json.loads(late.stdout)
        assert late.exit_code == 1 and said["result"] == "failed", said
        assert said["error"]["code"] == "deadline_passed" and said["error"]["state"] == "expired", said
        assert "never started" in said["error"]["message"], said
        with client(gw) as c:
            bad = c.post(
                "/v1/messages",
                json={"to": "builds", "message": "x"},
                headers={deadlines.HEADER: "soon-ish", "Idempotency-Key": "k-bad-deadline"},
            )
        assert bad.status_code == 400 and deadlines.HEADER in bad.json()["error"]["message"], bad.text


def test_a_running_turn_is_stopped_at_its_deadline_and_its_frame_told_it_when(initialised: Path) -> None:
    """A turn that would run 30 s, given a deadline 2 s away over HTTP: its frame said `Answer by …`, and at the
    deadline it is stopped as `runs stop` stops it (its messages kept), ending `expired` with deadline_passed."""
    assert run_cli("profile", "create", "builds").exit_code == 0
    with gateway_with(initialised) as gw, client(gw) as c:
        deadline = time.time() + 2
        answer = c.post(
            "/v1/messages",
            json={"to": "builds", "message": "/sleep 30\nthink hard"},
            headers={deadlines.HEADER: deadlines.wire(deadline), "X-Hermes-Wait-Seconds": "25"},
            timeout=httpx.Timeout(40.0),
        ).json()
        assert answer["result"] == "failed", answer
        assert answer["error"]["code"] == "deadline_passed", answer
        run = shown(answer["run_id"])
        assert run["state"] == "expired", run
        assert run["finished_at"] - deadline < 5  # stopped at its deadline, not after its 30 s
        messages = c.get(f"/p/builds/api/sessions/{answer['session_id']}/messages").json()["data"]
    said = [m["content"] for m in messages if m["role"] == "user"]
    assert said and said[-1].startswith("[Answer by ") and "from now" in said[-1], said  # kept, with its deadline
    assert said[-1].endswith("think hard")


def test_peer_dm_and_peer_run_carry_a_deadline_and_dm_stops_waiting_at_it(
    initialised: Path, spark: GatewayThread
) -> None:
    """`peer dm --deadline` and `peer run --deadline` carry the deadline to the peer, whose runs expire at it; a dm
    whose --wait is longer than its deadline returns at the deadline, not at the end of its wait or the turn's."""
    with gateway_with(initialised):
        before = time.time()
        started = time.monotonic()
        late = run_cli("peer", "dm", "spark", "/sleep 30\nslow one", "--deadline", "2s", "--wait", "60", "--json")
        assert time.monotonic() - started < 15, "the dm waited past its deadline"
        said = json.loads(late.stdout)
        assert late.exit_code in (0, 1) and said["result"] in ("receipt", "failed"), (said, late.stderr)
        if said["result"] == "failed":  # the peer's turn was stopped at the deadline before our wait ended
            assert said["error"]["code"] == "deadline_passed", said
        ran = json.loads(run_cli("peer", "run", "spark", "/sleep 30\nslower one", "--deadline", "3s", "--json").stdout)
        assert ran["result"] in ("receipt", "delivered") and ran["run_id"], ran
        quick = json.loads(run_cli("peer", "dm", "spark", "in good time", "--deadline", "10m", "--json").stdout)
        assert quick["result"] == "delivered" and quick["reply"].endswith("in good time"), quick

        def theirs() -> dict[str, dict[str, Any]]:
            return {e["message"].splitlines()[-1]: e for e in ledger(spark.root) if e["kind"] == "run"}

        ended = eventually(
            theirs,
            lambda runs: all(runs.get(m, {}).get("state") == "expired" for m in ("slow one", "slower one")),
            within=30,
            what="spark's two runs to expire at their deadlines",
        )
    slow, slower, good = ended["slow one"], ended["slower one"], ended["in good time"]
    assert before + 2 <= slow["deadline"] <= time.time() and slower["deadline"] - slow["deadline"] >= 0.5
    assert slow["finished_at"] - slow["deadline"] < 5 and slower["finished_at"] - slower["deadline"] < 5
    assert before + 600 <= good["deadline"] <= time.time() + 600 and good["state"] == "completed", good
