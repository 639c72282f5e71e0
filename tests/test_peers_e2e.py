"""End to end across two gateways: `backchannel peer ...` from one home to a real gateway of another.

Two homes, alpha and beta, each with a real `backchannel gateway` process on loopback, each registered
as a peer of the other. The CLI runs in-process (conftest.run_cli) with BACKCHANNEL_HOME switched per call.
The gateways are started once for the module; every test uses its own message texts (a `peer dm` without
a key is deduplicated on its content) and restores any profile setting it changes.

Every CLI call in this file is checked for leaked secrets (API keys, peer keys) on stdout and stderr, and
one test, with gateways of its own, checks every output and both gateways' logs after traffic of every kind.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.cli import output
from backchannel.home import config, profiles
from conftest import CliResult, GatewayProcess, api_key, free_port, is_private, run_cli
from gateway_http import in_home

TIMEOUT = httpx.Timeout(15.0)
BOT_CHAT = "Bot Chat"
WRONG_KEY = "wrongwrongwrong"
STDIN_KEY = "stdin-key-0123456789abcdef"

# Every secret that exists in this module; no CLI output and no gateway log may contain one.
SECRETS: set[str] = {WRONG_KEY, STDIN_KEY}


def cli(root: Path, *args: str, input: str | None = None) -> CliResult:
    """`backchannel ARGS` with BACKCHANNEL_HOME=root; fails the test if a secret shows up in its output."""
    with in_home(root):
        result = run_cli(*args, input=input)
    for secret in SECRETS:
        assert secret not in result.stdout, f"a secret leaked to stdout of {args}"
        assert secret not in result.stderr, f"a secret leaked to stderr of {args}"
    return result


@dataclass
class Pair:
    alpha: GatewayProcess
    beta: GatewayProcess
    alpha_key: str
    beta_key: str
    extra_gateways: list[GatewayProcess] = field(default_factory=list)

    @property
    def a(self) -> Path:
        return self.alpha.root

    @property
    def b(self) -> Path:
        return self.beta.root


def _init_home(root: Path) -> GatewayProcess:
    result = cli(root, "init")
    assert result.exit_code == 0, result.stderr
    gw = GatewayProcess(root, free_port())
    data = config.load_yaml(config.config_path(root))
    data["gateway"] = {**data["gateway"], "port": gw.port}
    config.write_yaml(config.config_path(root), data)
    return gw


def peer_key(root: Path, name: str) -> str:
    """A key made on `root` for peer `name`, reaching every profile there (printed once, on stdout)."""
    made = cli(root, "key", "create", name, "--profile", "*", "--json")
    assert made.exit_code == 0, made.stderr
    key: str = json.loads(made.stdout)["key"]
    return key


def fresh_link(pair: Pair, name: str) -> str:
    """A second way from alpha to beta: a key of its own on beta (so an exchange of its own), registered on alpha."""
    key = peer_key(pair.b, name)
    SECRETS.add(key)
    added = cli(pair.a, "peer", "add", name, "--url", pair.beta.url, "--key", key)
    assert added.exit_code == 0, added.stderr
    return name


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("peers")
    alpha = _init_home(base / "alpha")
    beta = _init_home(base / "beta")
    # A key each way: alpha_key reaches alpha (alpha made it for beta), beta_key reaches beta (made for alpha).
    p = Pair(alpha, beta, peer_key(alpha.root, "beta"), peer_key(beta.root, "alpha"))
    SECRETS.update({p.alpha_key, p.beta_key, api_key(alpha.root), api_key(beta.root)})
    try:
        alpha.start()
        beta.start()
        added = cli(p.a, "peer", "add", "beta", "--url", beta.url, "--key", p.beta_key, "--note", "the beta box")
        assert added.exit_code == 0, added.stderr
        added = cli(p.b, "peer", "add", "alpha", "--url", alpha.url, "--key", p.alpha_key)
        assert added.exit_code == 0, added.stderr
        yield p
    finally:
        alpha.kill()
        beta.kill()


@contextmanager
def api(gw: GatewayProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=TIMEOUT, trust_env=False) as c:
        yield c


def bot_chats(gw: GatewayProcess, profile: str = "default") -> list[dict[str, Any]]:
    prefix = "" if profile == "default" else f"/p/{profile}"
    with api(gw) as c:
        r = c.get(f"{prefix}/api/sessions", params={"title": BOT_CHAT, "limit": 200})
    assert r.status_code == 200, r.text
    return [s for s in r.json()["data"] if s["title"] == BOT_CHAT]


def bot_chat_id(gw: GatewayProcess, profile: str = "default") -> str:
    found = bot_chats(gw, profile)
    assert len(found) == 1, found
    return str(found[0]["id"])


def messages(gw: GatewayProcess, session_id: str, profile: str = "default") -> list[dict[str, Any]]:
    prefix = "" if profile == "default" else f"/p/{profile}"
    with api(gw) as c:
        r = c.get(f"{prefix}/api/sessions/{session_id}/messages")
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def user_messages_with(gw: GatewayProcess, text: str, profile: str = "default") -> list[dict[str, Any]]:
    """The user messages of the profile's Bot Chat that contain `text` (none when it has no Bot Chat yet)."""
    if not bot_chats(gw, profile):
        return []
    msgs = messages(gw, bot_chat_id(gw, profile), profile)
    return [m for m in msgs if m["role"] == "user" and text in m["content"]]


def ledger(root: Path) -> list[dict[str, Any]]:
    result = cli(root, "ledger", "--json", "--limit", "1000")
    assert result.exit_code == 0, result.stderr
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data


def dm_json(root: Path, *args: str, input: str | None = None) -> tuple[CliResult, dict[str, Any]]:
    result = cli(root, "peer", "dm", *args, "--json", input=input)
    try:
        body: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        body = {}
    return result, body


def wait_status(root: Path, peer: str, run_id: str, statuses: set[str], *, within: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        result = cli(root, "peer", "status", peer, run_id, "--json")
        data: dict[str, Any] = json.loads(result.stdout)
        # One mapping: 0 while it goes on or once it completed, 1 when it failed or is unknown.
        assert result.exit_code == (1 if data["result"] in ("failed", "unknown") else 0), (result.stderr, data)
        if data.get("status") in statuses:
            return data
        assert time.monotonic() < deadline, f"run {run_id} still {data.get('status')!r} after {within}s: {data}"
        time.sleep(0.1)


@contextmanager
def messaging_rules(root: Path, profile: str, **rules: Any) -> Iterator[None]:
    """Set keys of a profile's agent.session_messaging for the block, then restore the file as it was."""
    path = profiles.profile_dir(root, profile) / "config.yaml"
    original = path.read_text()
    data = config.load_yaml(path)
    data.setdefault("agent", {}).setdefault("session_messaging", {}).update(rules)
    config.write_yaml(path, data)
    try:
        yield
    finally:
        path.write_text(original)


def ensure_profile(root: Path, name: str) -> None:
    if name not in profiles.list_profiles(root):
        result = cli(root, "profile", "create", name)
        assert result.exit_code == 0, result.stderr


def tool_results(reply: str, tool: str) -> list[dict[str, Any]]:
    """The JSON results of `tool` in an echo reply (one `→ tool: {json}` line each)."""
    prefix = f"→ {tool}: "
    found: list[dict[str, Any]] = []
    for line in reply.splitlines():
        if line.startswith(prefix):
            found.append(json.loads(line[len(prefix) :]))
    return found


# --- 1. the registry ------------------------------------------------------------------------------


def test_registry_add_update_aliases_and_key_storage(pair: Pair) -> None:
    root = pair.a
    url = pair.beta.url

    first = cli(root, "peer", "add", "gamma", "--url", url, "--key", pair.beta_key, "--note", "gamma note")
    assert first.exit_code == 0, first.stderr
    assert "added" in first.stdout
    assert "updated" not in first.stdout

    again = cli(root, "peer", "add", "gamma", "--url", url, "--key", pair.beta_key)
    assert again.exit_code == 0, again.stderr
    assert "updated" in again.stdout

    via_set = cli(root, "peer", "set", "gamma", "--url", url + "/", "--key", pair.beta_key, "--note", "via set")
    assert via_set.exit_code == 0, via_set.stderr
    assert "updated" in via_set.stdout

    # No key given and nothing on stdin: the stored key is kept.
    kept = cli(root, "peer", "set", "gamma", "--url", url, input="")
    assert kept.exit_code == 0, kept.stderr
    assert "kept its key" in kept.stdout
    assert config.read_env(root)["BACKCHANNEL_PEER_GAMMA_KEY"] == pair.beta_key

    # A new peer with no key at all is refused.
    keyless = cli(root, "peer", "add", "keyless", "--url", url, input="")
    assert keyless.exit_code == 2, (keyless.stdout, keyless.stderr)
    assert "BACKCHANNEL_PEER_KEYLESS_KEY" not in config.read_env(root)

    listed = cli(root, "peer", "ls")
    assert listed.exit_code == 0, listed.stderr
    assert "gamma" in listed.stdout
    assert "beta" in listed.stdout

    as_json = cli(root, "peer", "list", "--json")
    assert as_json.exit_code == 0, as_json.stderr
    peers = {p["name"]: p for p in json.loads(as_json.stdout)}
    assert peers["beta"]["url"] == url
    assert peers["beta"]["note"] == "the beta box"
    assert peers["beta"]["key"] == "set"
    # `peer add` asked the running peer who it is, so its messages are shown under its name here.
    assert peers["beta"]["gateway_id"] == config.load_gateway_config(pair.b).gateway_id
    assert peers["gamma"]["note"] == "via set"
    assert peers["gamma"]["url"] == url
    assert pair.beta_key not in as_json.stdout

    # The key lives in .env (0600) under its variable, never in config.yaml.
    env = config.read_env(root)
    assert env["BACKCHANNEL_PEER_BETA_KEY"] == pair.beta_key
    assert env["BACKCHANNEL_PEER_GAMMA_KEY"] == pair.beta_key
    assert is_private(config.env_path(root))
    cfg_text = config.config_path(root).read_text()
    assert url in cfg_text
    assert "the beta box" in cfg_text
    assert pair.beta_key not in cfg_text
    assert pair.alpha_key not in cfg_text

    removed = cli(root, "peer", "rm", "gamma")
    assert removed.exit_code == 0, removed.stderr
    assert "removed" in removed.stdout
    assert "gamma" not in json.loads(cli(root, "peer", "list", "--json").stdout).__repr__()
    assert "BACKCHANNEL_PEER_GAMMA_KEY" not in config.read_env(root)


def test_registry_key_from_stdin(pair: Pair) -> None:
    root = pair.a
    result = cli(root, "peer", "add", "delta", "--url", "http://127.0.0.1:9", input=STDIN_KEY + "\n")
    assert result.exit_code == 0, result.stderr
    assert "added" in result.stdout
    assert config.read_env(root)["BACKCHANNEL_PEER_DELTA_KEY"] == STDIN_KEY
    assert STDIN_KEY not in config.config_path(root).read_text()
    listed = json.loads(cli(root, "peer", "list", "--json").stdout)
    assert {p["name"]: p["key"] for p in listed}["delta"] == "set"
    assert cli(root, "peer", "remove", "delta").exit_code == 0


def test_registry_bad_input_is_a_usage_error(pair: Pair) -> None:
    root = pair.a
    before_cfg = config.config_path(root).read_text()
    before_env = config.env_path(root).read_text()

    bad_name = cli(root, "peer", "add", "Bad", "--url", "http://127.0.0.1:1", "--key", "somekey-123456")
    assert bad_name.exit_code == 2, (bad_name.stdout, bad_name.stderr)
    bad_url = cli(root, "peer", "add", "okname", "--url", "ftp://x", "--key", "somekey-123456")
    assert bad_url.exit_code == 2, (bad_url.stdout, bad_url.stderr)
    ghost = cli(root, "peer", "remove", "ghost")
    assert ghost.exit_code == 2, (ghost.stdout, ghost.stderr)
    for r in (bad_name, bad_url, ghost):
        assert "Traceback" not in r.stderr
        assert r.stderr.strip(), "a usage error says why on stderr"

    assert config.config_path(root).read_text() == before_cfg
    assert config.env_path(root).read_text() == before_env


# --- 2. dm ----------------------------------------------------------------------------------------


def test_dm_delivers_into_the_bot_chat_framed_as_from_a_peer(pair: Pair) -> None:
    result = cli(pair.a, "peer", "dm", "beta", "hello")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "default (echo): hello"

    found = user_messages_with(pair.beta, "hello")
    assert len(found) == 1, found
    assert found[0]["content"].startswith("[Message from peer alpha/default "), found[0]
    assert found[0]["content"].endswith("\nhello")

    second = cli(pair.a, "peer", "dm", "beta", "hello again")
    assert second.exit_code == 0, second.stderr
    assert second.stdout.strip() == "default (echo): hello again"
    assert len(bot_chats(pair.beta)) == 1, "a second dm must land in the same Bot Chat"
    assert len(user_messages_with(pair.beta, "hello again")) == 1

    # The person's side keeps the exchange in alpha's ledger.
    sent = [e for e in ledger(pair.a) if e["message"] == "hello" and e["target"] == "peer:beta"]
    assert len(sent) == 1, sent
    assert sent[0]["sender"] == "human:cli"
    assert sent[0]["state"] == "delivered"
    assert sent[0]["reply"] == "default (echo): hello"


def test_dm_to_another_agent_lands_in_its_bot_chat(pair: Pair) -> None:
    ensure_profile(pair.b, "research")
    result = cli(pair.a, "peer", "dm", "beta/research", "what did you find?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "research (echo): what did you find?"

    found = user_messages_with(pair.beta, "what did you find?", profile="research")
    assert len(found) == 1, found
    assert found[0]["content"].startswith("[Message from peer ")
    assert not user_messages_with(pair.beta, "what did you find?"), "it must not land in default's Bot Chat"


def test_dm_reads_the_message_from_stdin(pair: Pair) -> None:
    dash = cli(pair.a, "peer", "dm", "beta", "-", input="piped with a dash\n")
    assert dash.exit_code == 0, dash.stderr
    assert dash.stdout.strip() == "default (echo): piped with a dash"

    bare = cli(pair.a, "peer", "dm", "beta", input="piped without an argument\n")
    assert bare.exit_code == 0, bare.stderr
    assert bare.stdout.strip() == "default (echo): piped without an argument"


def test_dm_json_shape(pair: Pair) -> None:
    result, body = dm_json(pair.a, "beta", "shape check")
    assert result.exit_code == 0, result.stderr
    assert {"result", "peer", "agent", "session_id", "run_id", "reply", "error"} <= set(body), body
    assert body["result"] == "delivered"
    assert body["peer"] == "beta"
    assert body["agent"] is None
    assert body["session_id"] == bot_chat_id(pair.beta)
    assert body["run_id"]
    assert body["reply"] == "default (echo): shape check"
    assert body["error"] is None


def test_peer_run_stop_and_status_json_have_the_one_outcome_shape_of_every_json_output(pair: Pair) -> None:
    """`result` (the outcome) and `error` as `{code, message}` or null, as `peer dm --json` and `send --json`."""

    def shaped(*args: str) -> dict[str, Any]:
        done = cli(pair.a, "peer", *args, "--json")
        body: dict[str, Any] = json.loads(done.stdout)
        assert body["result"] in ("delivered", "receipt", "held", "refused", "failed", "unknown"), body
        assert body["error"] is None or set(body["error"]) >= {"code", "message"}, body
        return body

    started = shaped("run", "beta", "/sleep 30\nstopped soon")
    assert (started["result"], started["error"]) == ("receipt", None), started
    stopped = shaped("stop", "beta", started["run_id"])
    assert stopped["status"] == "cancelled" and stopped["result"] == "failed", stopped
    assert stopped["error"] is not None and stopped["error"]["code"] == "cancelled", stopped
    unknown = shaped("status", "beta", "run_doesnotexist")
    assert unknown["result"] == "unknown" and unknown["error"]["code"] == "run_not_found", unknown
    assert unknown["error"]["message"], unknown


def test_peer_status_follow_says_still_running_through_a_silence(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "STILL_RUNNING_SECONDS", 0.4)  # 30 s for a person
    started = json.loads(cli(pair.a, "peer", "run", "beta", "/sleep 2\nlong peer work", "--json").stdout)
    followed = cli(pair.a, "peer", "status", "beta", started["run_id"], "--follow")
    assert followed.exit_code == 0 and "long peer work" in followed.stdout, followed.stderr
    still = [line for line in followed.stderr.splitlines() if line.startswith("still running (")]
    assert len(still) >= 2 and re.fullmatch(r"still running \(\d+s\)", still[-1]), followed.stderr


def test_dm_with_an_idempotency_key_is_delivered_once(pair: Pair) -> None:
    first, one = dm_json(pair.a, "beta", "keyed hello", "--idempotency-key", "kdm-1")
    assert first.exit_code == 0, first.stderr
    second, two = dm_json(pair.a, "beta", "keyed hello", "--idempotency-key", "kdm-1")
    assert second.exit_code == 0, second.stderr
    assert one["result"] == two["result"] == "delivered", (one, two)
    assert one["run_id"] == two["run_id"]
    assert two["reply"] == "default (echo): keyed hello"
    assert len(user_messages_with(pair.beta, "keyed hello")) == 1

    # The same key for another message is refused by the peer, not run: exit 2.
    other = cli(pair.a, "peer", "dm", "beta", "another text, same key", "--idempotency-key", "kdm-1")
    assert other.exit_code == 2, (other.stdout, other.stderr)
    assert not user_messages_with(pair.beta, "another text, same key")


def test_dm_to_an_agent_the_peer_does_not_have_is_a_usage_error(pair: Pair) -> None:
    for agent in ("nosuchagent", "Research"):  # upper case is a valid name for a client (Hermes accepts it)
        result = cli(pair.a, "peer", "dm", f"beta/{agent}", "anyone?")
        assert result.exit_code == 2, (agent, result.stdout, result.stderr)  # change the request: resending fails
        assert agent in result.stderr
        assert "Traceback" not in result.stderr


# --- 3. receipts ----------------------------------------------------------------------------------


def test_dm_past_its_wait_gives_a_receipt_then_status_follows_it(pair: Pair) -> None:
    result, body = dm_json(pair.a, "beta", "/sleep 2\nslow one", "--wait", "0.3")
    assert result.exit_code == 0, result.stderr
    assert body["result"] == "receipt", body  # past its wait the dm returns a receipt, not the reply
    run_id = body["run_id"]
    assert run_id

    # Without --idempotency-key the command made a fresh key and printed it; sending again with it is
    # the same message, not a second turn.
    key = body["idempotency_key"]
    assert key
    resent, again = dm_json(pair.a, "beta", "/sleep 2\nslow one", "--wait", "0.3", "--idempotency-key", key)
    assert resent.exit_code == 0, resent.stderr
    assert again["run_id"] == run_id, again

    followed = cli(pair.a, "peer", "status", "beta", run_id, "--follow")
    assert followed.exit_code == 0, followed.stderr
    assert "completed" in followed.stdout
    assert "default (echo): slow one" in followed.stdout

    unknown = cli(pair.a, "peer", "status", "beta", "run_doesnotexist")
    assert unknown.exit_code == 1, unknown.stderr  # unknown is an outcome that did not arrive
    assert "unknown" in unknown.stdout
    assert len(user_messages_with(pair.beta, "slow one")) == 1


# --- 4. exit codes --------------------------------------------------------------------------------


def test_dm_exit_codes(pair: Pair) -> None:
    root = pair.a
    unknown = cli(root, "peer", "dm", "nosuchpeer", "hi there")
    assert unknown.exit_code == 2, (unknown.stdout, unknown.stderr)

    closed = free_port()
    assert (
        cli(root, "peer", "add", "closed", "--url", f"http://127.0.0.1:{closed}", "--key", "closed-key-123").exit_code
        == 0
    )
    unreachable = cli(root, "peer", "dm", "closed", "anyone home?")
    assert unreachable.exit_code == 1, (unreachable.stdout, unreachable.stderr)
    assert "could not reach" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr

    assert cli(root, "peer", "add", "wrong", "--url", pair.beta.url, "--key", WRONG_KEY).exit_code == 0
    wrong = cli(root, "peer", "dm", "wrong", "let me in")
    assert wrong.exit_code == 1, (wrong.stdout, wrong.stderr)
    assert "key" in wrong.stderr
    assert "Traceback" not in wrong.stderr

    bad_target = cli(root, "peer", "dm", "beta/a/b/c", "hi there")
    assert bad_target.exit_code == 2, (bad_target.stdout, bad_target.stderr)

    empty = cli(root, "peer", "dm", "beta", "")
    assert empty.exit_code == 2, (empty.stdout, empty.stderr)
    blank_stdin = cli(root, "peer", "dm", "beta", "-", input="  \n")
    assert blank_stdin.exit_code == 2, (blank_stdin.stdout, blank_stdin.stderr)

    failing = cli(root, "peer", "dm", "beta", "/fail boom")
    assert failing.exit_code == 1, (failing.stdout, failing.stderr)
    assert "boom" in failing.stderr
    assert "Traceback" not in failing.stderr

    # Following a run that failed ends with exit 1 as well.
    failed_json, failed = dm_json(root, "beta", "/fail bang")
    assert failed_json.exit_code == 1, (failed_json.stdout, failed_json.stderr)
    assert failed["result"] == "failed", failed
    assert "bang" in failed["error"]["message"]
    assert failed["run_id"], failed
    followed = cli(root, "peer", "status", "beta", failed["run_id"], "--follow")
    assert followed.exit_code == 1, (followed.stdout, followed.stderr)
    assert "failed" in followed.stdout

    for name in ("closed", "wrong"):
        assert cli(root, "peer", "rm", name).exit_code == 0


# --- 5. run, idempotent ---------------------------------------------------------------------------


def test_run_with_an_idempotency_key_runs_the_turn_once(pair: Pair) -> None:
    text = "run me exactly once"
    first = cli(pair.a, "peer", "run", "beta", text, "--idempotency-key", "k1", "--json")
    assert first.exit_code == 0, first.stderr
    started = json.loads(first.stdout)
    run_id = started["run_id"]
    assert started["replayed"] is False

    second = cli(pair.a, "peer", "run", "beta", text, "--idempotency-key", "k1")
    assert second.exit_code == 0, second.stderr
    assert run_id in second.stdout
    assert "replayed" in second.stdout

    done = wait_status(pair.a, "beta", run_id, {"completed", "failed", "cancelled", "expired"})
    assert done["status"] == "completed", done
    assert done["output"] == f"default (echo): {text}"

    shown = cli(pair.a, "peer", "status", "beta", run_id)
    assert shown.exit_code == 0, shown.stderr
    assert "completed" in shown.stdout
    assert f"default (echo): {text}" in shown.stdout

    # A later run into the same Bot Chat is answered after whatever was queued before it (one turn at a time, in
    # order): once it has, a wrongly queued second turn would be there.
    later = cli(pair.a, "peer", "run", "beta", "the run after", "--json")
    assert later.exit_code == 0, later.stderr
    ended = wait_status(pair.a, "beta", json.loads(later.stdout)["run_id"], {"completed", "failed", "cancelled"})
    assert ended["status"] == "completed", ended
    assert len(user_messages_with(pair.beta, "the run after")) == 1  # the same session
    assert len(user_messages_with(pair.beta, text)) == 1


# --- 6. stop --------------------------------------------------------------------------------------


def test_stop_cancels_a_slow_run_quickly(pair: Pair) -> None:
    ensure_profile(pair.b, "slowpoke")
    started = cli(pair.a, "peer", "run", "beta/slowpoke", "/sleep 20\nnever finished", "--json")
    assert started.exit_code == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    wait_status(pair.a, "beta/slowpoke", run_id, {"running"}, within=5)

    stopped = cli(pair.a, "peer", "stop", "beta/slowpoke", run_id)
    assert stopped.exit_code == 0, stopped.stderr
    assert "cancelled" in stopped.stdout  # cut mid-turn: the 20 s turn did not run out
    assert wait_status(pair.a, "beta/slowpoke", run_id, {"cancelled"}, within=3)["status"] == "cancelled"


def test_status_and_stop_find_a_run_sent_to_another_agent_without_naming_it(pair: Pair) -> None:
    """`peer status beta RUN` for a run started on beta/slowpoke: the agent is known from sending it."""
    ensure_profile(pair.b, "slowpoke")
    started = cli(pair.a, "peer", "run", "beta/slowpoke", "/sleep 20\nlong job", "--json")
    assert started.exit_code == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    deadline = time.monotonic() + 5
    while True:
        status = cli(pair.a, "peer", "status", "beta", run_id, "--json")
        assert status.exit_code == 0, status.stderr
        body = json.loads(status.stdout)
        assert body["status"] != "unknown", body
        if body["status"] == "running":
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.1)
    assert body["agent"] == "slowpoke", body
    stopped = cli(pair.a, "peer", "stop", "beta", run_id, "--json")
    assert stopped.exit_code == 0, stopped.stderr
    assert json.loads(stopped.stdout)["status"] == "cancelled", stopped.stdout
    assert wait_status(pair.a, "beta/slowpoke", run_id, {"cancelled"}, within=3)["status"] == "cancelled"


# --- 7. agents across gateways --------------------------------------------------------------------


def test_agent_send_to_peer_is_refused_without_an_allow_entry(pair: Pair) -> None:
    result = cli(pair.a, "send", "default", "/peer beta may I?", "--json")
    assert result.exit_code == 0, result.stderr
    reply = json.loads(result.stdout)["reply"]
    results = tool_results(reply, "send_to_peer")
    assert len(results) == 1, reply
    assert results[0]["error"]["code"] == "not_allowed", results

    refused = [e for e in ledger(pair.a) if e["message"] == "may I?" and e["target"].startswith("peer:beta")]
    assert [e["state"] for e in refused] == ["refused:not_allowed"], refused
    assert not user_messages_with(pair.beta, "may I?")


def test_agent_sends_to_an_agent_on_another_gateway(pair: Pair) -> None:
    # The sender's own accept list says who may message *it*; it must not stop what it sends.
    with messaging_rules(pair.a, "default", allow=["peer:beta/*", "peer:beta"], accept=["nobody"]):
        result = cli(pair.a, "send", "default", "/peer beta are you there?", "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["via"] == "gateway"
    results = tool_results(out["reply"], "send_to_peer")
    assert len(results) == 1, out["reply"]
    assert results[0]["result"] == "delivered", json.dumps(results)
    assert results[0]["reply"] == "default (echo): are you there?"

    sent = [e for e in ledger(pair.a) if e["message"] == "are you there?" and e["target"] == "peer:beta"]
    assert [e["state"] for e in sent] == ["delivered"], sent

    received = [e for e in ledger(pair.b) if "are you there?" in e["message"] and e["sender"].startswith("peer:")]
    assert len(received) == 1, received
    assert received[0]["sender"] == "peer:alpha/default", received
    assert received[0]["state"] == "completed"
    assert received[0]["hops"] == 1

    # check_message knows a message sent to a peer by the run id the peer gave
    check = json.dumps({"run_id": results[0]["run_id"]})
    checked = cli(pair.a, "send", "default", f"/tool check_message {check}", "--json")
    found = tool_results(json.loads(checked.stdout)["reply"], "check_message")
    assert len(found) == 1, found
    assert {k: found[0].get(k) for k in ("result", "run_id", "to", "reply")} == {
        "result": "delivered",
        "run_id": results[0]["run_id"],
        "to": "peer:beta",
        "reply": "default (echo): are you there?",
    }, found


def test_a_reply_that_would_come_back_into_the_waiting_session_is_refused_as_a_deadlock(pair: Pair) -> None:
    """alpha's Bot Chat waits on beta; beta's agent asking alpha's Bot Chat back would wait forever."""
    back = json.dumps({"target": "alpha", "message": "ping back", "wait_seconds": 5})
    with (
        messaging_rules(pair.a, "default", allow=["peer:beta/*", "peer:beta"]),
        messaging_rules(pair.b, "default", allow=["peer:alpha/*", "peer:alpha"]),
    ):
        result = cli(pair.a, "send", "default", f"/peer beta /tool send_to_peer {back}", "--json")
    assert result.exit_code == 0, result.stderr  # refused at once (would_deadlock below), not after the 5 s wait
    outer = tool_results(json.loads(result.stdout)["reply"], "send_to_peer")
    assert len(outer) == 1 and outer[0]["result"] == "delivered", outer
    inner = tool_results(outer[0]["reply"], "send_to_peer")
    assert len(inner) == 1, outer[0]["reply"]
    assert inner[0]["result"] == "refused", inner
    assert inner[0]["error"]["code"] == "would_deadlock", inner

    # beta knows from its own records that alpha waits on the turn asking: it refuses before anything leaves.
    refusals = [e for e in ledger(pair.a) + ledger(pair.b) if e["message"] == "ping back"]
    assert [e["state"] for e in refusals] == ["refused:would_deadlock"], refusals
    assert refusals[0]["sender"].startswith("default/") and refusals[0]["target"] == "peer:alpha", refusals
    assert refusals[0]["hops"] == 2, refusals


@pytest.mark.parametrize("accept", [None, ["nobody"]], ids=["no-accept-list", "accept-list-without-the-peer"])
def test_a_late_peer_reply_wakes_the_sending_session(pair: Pair, accept: list[str] | None) -> None:
    """An agent's send_to_peer that gets a receipt has the reply delivered into its session when it comes;
    the sender's own accept list (who may message it) never refuses the answer to what it asked."""
    text = f"/sleep 1\nlate answer {accept!r}"
    args = json.dumps({"target": "beta", "message": text, "wait_seconds": 0.2})
    with messaging_rules(pair.a, "default", allow=["peer:beta"], accept=accept):
        result = cli(pair.a, "send", "default", f"/tool send_to_peer {args}", "--json")
        assert result.exit_code == 0, result.stderr
        out = json.loads(result.stdout)
        sent = tool_results(out["reply"], "send_to_peer")
        assert len(sent) == 1 and sent[0]["result"] == "receipt", sent
        remote_run = sent[0]["run_id"]
        assert remote_run

        deadline = time.monotonic() + 15
        while True:
            woken = [
                m
                for m in messages(pair.alpha, out["session_id"])
                if m["role"] == "user" and text.splitlines()[1] in m["content"] and remote_run in m["content"]
            ]
            if woken:
                break
            assert time.monotonic() < deadline, "the late reply never reached the sending session"
            time.sleep(0.2)
    assert len(woken) == 1, woken
    assert f"default (echo): {text.splitlines()[1]}" in woken[0]["content"]
    entries = [e for e in ledger(pair.a) if e["message"] == text and e["target"] == "peer:beta"]
    assert [e["state"] for e in entries] == ["delivered"], entries
    assert not [e for e in ledger(pair.a) if e["state"].startswith("refused") and remote_run in e["message"]]


def test_a_peer_that_refuses_gives_exit_2_and_agents_a_refusal(pair: Pair) -> None:
    with messaging_rules(pair.b, "default", accept=["peer:nobody"]):
        refused = cli(pair.a, "peer", "dm", "beta", "knock knock")
        assert refused.exit_code == 2, (refused.stdout, refused.stderr)
        assert "not_allowed" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert not user_messages_with(pair.beta, "knock knock")
    assert [e["state"] for e in ledger(pair.b) if e["message"] == "knock knock"] == ["refused:not_allowed"]

    # A person's message is hop 0: a peer with max_hops 0 takes it; an agent's (hop 1) is refused there.
    # A link of its own (beta's exchanges with alpha reached further hops earlier in this module).
    link = fresh_link(pair, "hopzero")
    with (
        messaging_rules(pair.b, "default", max_hops=0),
        messaging_rules(pair.a, "default", allow=[f"peer:{link}"]),
    ):
        person = cli(pair.a, "peer", "dm", link, "from a person, hop zero")
        assert person.exit_code == 0, person.stderr
        agent = cli(pair.a, "send", "default", f"/peer {link} from an agent, hop one", "--json")
    assert agent.exit_code == 0, agent.stderr
    results = tool_results(json.loads(agent.stdout)["reply"], "send_to_peer")
    assert len(results) == 1 and results[0]["result"] == "refused", results
    assert "hop_limit" in json.dumps(results[0]["error"]), results
    assert [e["state"] for e in ledger(pair.b) if e["message"] == "from an agent, hop one"] == ["refused:hop_limit"]


def test_status_and_stop_of_an_unknown_peer_are_usage_errors(pair: Pair) -> None:
    for verb in ("status", "stop"):
        result = cli(pair.a, "peer", verb, "nosuchpeer", "run_whatever")
        assert result.exit_code == 2, (verb, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_registered_peer_is_named_by_its_registry_name_on_arrival(pair: Pair) -> None:
    """Senders are `peer:<name>` (DESIGN 4.3): beta calls alpha by the name it registered, so accept lists work."""
    # Re-register alpha on beta so that nothing beta may have learned earlier in the module helps.
    assert cli(pair.b, "peer", "rm", "alpha").exit_code == 0
    readded = cli(pair.b, "peer", "add", "alpha", "--url", pair.alpha.url, "--key", pair.alpha_key)
    assert readded.exit_code == 0, readded.stderr

    with messaging_rules(pair.b, "default", accept=["peer:alpha", "peer:alpha/*"]):
        result = cli(pair.a, "peer", "dm", "beta", "it is me, alpha")
    senders = [e["sender"] for e in ledger(pair.b) if e["message"] == "it is me, alpha"]
    assert senders == ["peer:alpha/default"], senders
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert result.stdout.strip() == "default (echo): it is me, alpha"


# --- 8. hops and deadlock across gateways ---------------------------------------------------------


def test_hop_limit_and_deadlock_are_enforced_on_arrival(pair: Pair) -> None:
    gateway_id = config.load_gateway_config(pair.b).gateway_id
    assert gateway_id
    # Make sure the Bot Chat exists (earlier tests made it; this one may run alone).
    assert cli(pair.a, "peer", "dm", "beta", "warm up the bot chat").exit_code == 0
    session_id = bot_chat_id(pair.beta)

    def deliver(message: str, **headers: str) -> httpx.Response:
        with api(pair.beta) as c:  # as alpha: with the key beta made for it
            return c.post(
                f"/api/sessions/{session_id}/chat",
                json={"message": message},
                headers={
                    "Authorization": f"Bearer {pair.beta_key}",
                    "X-Hermes-Sender-Profile": "default",
                    "X-Hermes-Wait-Seconds": "5",
                    **headers,
                },
            )

    def refused(r: httpx.Response, code: str) -> bool:
        body = r.json()
        if r.status_code == 403:
            return bool(body["error"]["code"] == code)
        return r.status_code == 200 and body.get("result") == "refused"

    with messaging_rules(pair.b, "default", max_hops=2):
        too_far = deliver("one hop too many", **{"X-Backchannel-Hops": "3", "Idempotency-Key": "x1"})
        assert refused(too_far, "hop_limit"), (too_far.status_code, too_far.text)

        within = deliver("hop two is fine", **{"X-Backchannel-Hops": "2", "Idempotency-Key": "x2"})
        assert within.status_code == 200, within.text

        loop = deliver(
            "you are waiting for me",
            **{"X-Backchannel-Chain": f"{gateway_id}:{session_id}", "Idempotency-Key": "x3"},
        )
        assert refused(loop, "would_deadlock"), (loop.status_code, loop.text)

    states = {e["message"]: e["state"] for e in ledger(pair.b)}
    assert states.get("one hop too many") == "refused:hop_limit", states
    assert states.get("you are waiting for me") == "refused:would_deadlock", states
    assert not user_messages_with(pair.beta, "one hop too many")
    assert not user_messages_with(pair.beta, "you are waiting for me")


# --- 9. send peer:... -----------------------------------------------------------------------------


def test_send_to_a_peer_address_works_like_peer_dm(pair: Pair) -> None:
    ensure_profile(pair.b, "research")
    result = cli(pair.a, "send", "peer:beta", "hi from send")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "default (echo): hi from send"
    found = user_messages_with(pair.beta, "hi from send")
    assert len(found) == 1, found
    assert found[0]["content"].startswith("[Message from peer ")

    as_json = cli(pair.a, "send", "peer:beta/research", "hi research", "--json")
    assert as_json.exit_code == 0, as_json.stderr
    body = json.loads(as_json.stdout)
    assert body["result"] == "delivered"
    assert body["agent"] == "research"
    assert body["reply"] == "research (echo): hi research"


# --- nothing leaked into the logs -------------------------------------------------------------------


def test_no_secret_in_either_gateway_log_or_any_cli_output(tmp_path: Path) -> None:
    """Its own two gateways and its own traffic (dm both ways, run, status, follow, stop, a wrong key),
    then every CLI output and both gateways' complete logs are searched for every key."""
    alpha, beta = _init_home(tmp_path / "alpha"), _init_home(tmp_path / "beta")
    alpha_key, beta_key = api_key(alpha.root), api_key(beta.root)
    wrong_key = "wrong-key-" + alpha_key[-12:][::-1]  # a key-like string no gateway accepts
    secrets = {"alpha's key": alpha_key, "beta's key": beta_key, "the wrong key": wrong_key}
    outputs: list[tuple[tuple[str, ...], CliResult]] = []

    def run(root: Path, *args: str, input: str | None = None, exit_code: int = 0) -> CliResult:
        result = cli(root, *args, input=input)
        assert result.exit_code == exit_code, (args, result.stdout, result.stderr)
        outputs.append((args, result))
        return result

    try:
        alpha.start()
        beta.start()
        run(alpha.root, "peer", "add", "beta", "--url", beta.url, "--key", beta_key)
        run(beta.root, "peer", "add", "alpha", "--url", alpha.url, input=alpha_key + "\n")  # key from stdin
        run(alpha.root, "peer", "add", "wrong", "--url", beta.url, "--key", wrong_key)
        run(alpha.root, "peer", "list")
        run(alpha.root, "peer", "list", "--json")

        assert run(alpha.root, "peer", "dm", "beta", "leak check").stdout.strip() == "default (echo): leak check"
        run(beta.root, "peer", "dm", "alpha", "leak check back", "--json")
        dm = json.loads(run(alpha.root, "peer", "dm", "beta", "leak check json", "--json").stdout)
        quick = json.loads(run(alpha.root, "peer", "run", "beta", "leak check run", "--json").stdout)["run_id"]
        run(alpha.root, "peer", "status", "beta", quick, "--follow")
        run(alpha.root, "peer", "status", "beta", quick, "--json")
        slow = json.loads(run(alpha.root, "peer", "run", "beta", "/sleep 20\nleak check slow", "--json").stdout)
        slow_id = slow["run_id"]
        wait_status(alpha.root, "beta", slow_id, {"running"}, within=5)
        assert "cancelled" in run(alpha.root, "peer", "stop", "beta", slow_id).stdout
        run(alpha.root, "peer", "stop", "beta", slow_id, "--json")
        wrong = run(alpha.root, "peer", "dm", "wrong", "let me in", exit_code=1)
        assert wrong.stderr.strip() == (  # what to do about it, not the words the peer has for its HTTP clients
            f"error: peer 'wrong' at {beta.url} refused our key (HTTP 401): ask its person for a key (`backchannel"
            f" key create NAME` on their side) and keep it here with `backchannel peer add wrong --url {beta.url}`"
        ), wrong.stderr
        run(alpha.root, "peer", "run", "wrong", "let me in too", exit_code=1)
        run(alpha.root, "peer", "status", "wrong", slow_id, exit_code=1)
        with httpx.Client(base_url=beta.url, timeout=TIMEOUT, trust_env=False) as c:  # wrong keys straight in
            for header in (f"Bearer {wrong_key}", f"Bearer {alpha_key}", wrong_key):
                assert c.get("/v1/capabilities", headers={"Authorization": header}).status_code == 401
        run(alpha.root, "ledger", "--json")
    finally:
        for gw in (alpha, beta):  # a graceful stop: the logs are complete when read
            if gw.proc is not None and gw.proc.poll() is None:
                gw.terminate()
            gw.kill()

    logs = {"alpha": alpha.log(), "beta": beta.log()}
    # the logs saw the traffic (so an empty or unrelated log cannot pass) ...
    for run_id in (dm["run_id"], quick, slow_id):
        assert run_id in logs["beta"], f"beta's log does not show run {run_id}"
    assert logs["alpha"], "alpha wrote no log at all"
    # ... and no key is in any of it (checked as booleans: a failure must not print the key either)
    leaks = [
        f"{what} in the log of {name}"
        for what, secret in secrets.items()
        for name, text in logs.items()
        if secret in text
    ] + [
        f"{what} in the {stream} of {args}"
        for what, secret in secrets.items()
        for args, result in outputs
        for stream, text in (("stdout", result.stdout), ("stderr", result.stderr))
        if secret in text
    ]
    assert leaks == [], leaks


def test_an_agents_send_to_an_unreachable_peer_is_a_failed_result_not_a_failed_turn(pair: Pair) -> None:
    closed = free_port()
    add = cli(pair.a, "peer", "add", "gone", "--url", f"http://127.0.0.1:{closed}", "--key", "gone-key-1234")
    assert add.exit_code == 0, add.stderr
    try:
        with messaging_rules(pair.a, "default", allow=["peer:gone"]):
            result = cli(pair.a, "send", "default", "/peer gone anyone there?", "--json")
        assert result.exit_code == 0, result.stderr  # the turn went on and answered
        sent = tool_results(json.loads(result.stdout)["reply"], "send_to_peer")
        assert len(sent) == 1 and sent[0]["result"] == "failed", sent
        assert sent[0]["error"]["code"] == "peer_unreachable", sent
        entries = [e for e in ledger(pair.a) if e["target"] == "peer:gone"]
        assert [e["state"] for e in entries] == ["failed"], entries
    finally:
        assert cli(pair.a, "peer", "rm", "gone").exit_code == 0


def test_dm_json_gives_an_error_as_code_and_message_for_refused_and_failed(pair: Pair) -> None:
    failing, failed = dm_json(pair.a, "beta", "/fail broken on purpose")
    assert failing.exit_code == 1 and failed["result"] == "failed", (failing.stdout, failing.stderr)
    assert set(failed["error"]) == {"code", "message"} and "broken on purpose" in failed["error"]["message"], failed
    with messaging_rules(pair.b, "default", accept=["peer:nobody"]):
        refusing, refused = dm_json(pair.a, "beta", "let me in, json")
        sending = cli(pair.a, "send", "peer:beta", "let me in, send", "--json")
    assert refusing.exit_code == 2 and refused["result"] == "refused", (refusing.stdout, refusing.stderr)
    assert refused["error"]["code"] == "not_allowed" and refused["error"]["message"], refused
    assert sending.exit_code == 2, (sending.stdout, sending.stderr)
    assert json.loads(sending.stdout)["error"]["code"] == "not_allowed"  # `send peer:…` is `peer dm`


def test_dm_says_one_outcome_and_one_run_state_over_either_dialect(pair: Pair) -> None:
    card = f"{pair.beta.url}/.well-known/agent-card.json"
    added = cli(pair.a, "peer", "add", "beta-card", "--url", card, "--key", pair.beta_key, "--no-key-back")
    assert added.exit_code == 0, added.stderr
    said = {}
    for peer in ("beta", "beta-card"):  # the Hermes dialect, then A2A
        result, body = dm_json(pair.a, peer, f"one word over {peer}")
        assert result.exit_code == 0, result.stderr
        said[peer] = (body["result"], body["state"])
    assert said == {"beta": ("delivered", "completed"), "beta-card": ("delivered", "completed")}, said
