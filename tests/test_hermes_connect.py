"""`backchannel hermes connect`: a Hermes home's own key, through the real CLI and a real gateway.

The key it writes into the Hermes home's .env acts as that profile's sessions (their tools and mentions, under the
profile's rules) and is refused (403 agent_key_scope) for anything else; the person's key never leaves the home.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import httpx
import pytest

from backchannel.cli.hermes_cmd import restart_hint
from backchannel.home import config
from conftest import GatewayThread, api_key, is_private, run_cli
from gateway_http import set_messaging

HERMES_CONFIG = """\
# the person's Hermes settings: kept as they are
model:
  provider: custom   # a comment on a value
  default: qwen
platform_toolsets:
  api_server: [web, terminal]
plugins:
  enabled: [memory-thing]
"""


@pytest.fixture
def hermes_home(tmp_path: Path) -> Path:
    home = tmp_path / "hermes home"  # a space, as under a Windows user folder
    home.mkdir()
    (home / "config.yaml").write_text(HERMES_CONFIG)
    (home / ".env").write_text("OPENAI_API_KEY=sk-theirs\nAPI_SERVER_KEY=hermes-api-key-0123456789\n")
    return home


def connect(*args: str) -> dict[str, Any]:
    done = run_cli("hermes", "connect", *args, "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def hermes_env(home: Path) -> dict[str, str]:
    return config.read_env(home)


def as_key(gw: GatewayThread, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=gw.url, headers={"Authorization": f"Bearer {key}"}, timeout=httpx.Timeout(30.0), trust_env=False
    )


def test_connect_writes_its_own_key_the_url_and_profile_and_enables_the_plugin(
    initialised: Path, hermes_home: Path
) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    out = connect("research", "--hermes-home", str(hermes_home))
    assert out["key_was"] == "made" and out["key_name"] == "hermes-research" and out["profile_made"] is None
    assert out["hermes_home"] == str(hermes_home)
    env = hermes_env(hermes_home)
    assert env["BACKCHANNEL_PROFILE"] == "research"
    assert env["BACKCHANNEL_URL"].startswith("http://127.0.0.1:")
    assert env["BACKCHANNEL_API_KEY"].startswith("bcpk_")
    assert env["OPENAI_API_KEY"] == "sk-theirs"  # the other lines kept
    assert api_key(initialised) not in (hermes_home / ".env").read_text()  # the person's key stays home
    assert is_private(hermes_home / ".env")
    text = (hermes_home / "config.yaml").read_text()
    assert "# the person's Hermes settings: kept as they are" in text and "# a comment on a value" in text
    data = config.load_yaml(hermes_home / "config.yaml")
    assert data["model"] == {"provider": "custom", "default": "qwen"}
    assert data["plugins"]["enabled"] == ["memory-thing", "backchannel"]
    assert data["plugins"]["entries"]["backchannel"] == {"allow_tool_override": False}
    assert data["platform_toolsets"]["api_server"] == ["web", "terminal", "backchannel"]
    assert data["tools"]["tool_search"]["enabled"] in (False, "off")  # 0.22's search would hide the tools' names
    assert "tools.tool_search.enabled: off" in out["config_added"]
    assert any("hermes gateway restart" in line for line in out["restart"])
    listed = json.loads(run_cli("key", "list", "--json").stdout)
    assert [(k["name"], k["acts_as"], k["hermes_home"]) for k in listed] == [
        ("hermes-research", "research", str(hermes_home))
    ]

    # Again: the key the home holds is in force, so it is kept and nothing changes; --rotate makes a new one.
    again = connect("research", "--hermes-home", str(hermes_home))
    assert again["key_was"] == "reused" and again["env_set"] == [] and again["config_added"] == []
    assert not any("hermes gateway" in line for line in again["restart"])
    assert hermes_env(hermes_home)["BACKCHANNEL_API_KEY"] == env["BACKCHANNEL_API_KEY"]
    said = run_cli("hermes", "connect", "research", "--hermes-home", str(hermes_home))
    assert said.exit_code == 0 and "Traceback" not in said.stderr, said.stderr
    assert "key hermes-research: kept (that .env holds it" in said.stdout
    assert "nothing changed: nothing to restart" in said.stdout
    rotated = connect("research", "--hermes-home", str(hermes_home), "--rotate")
    assert rotated["key_was"] == "rotated" and rotated["env_set"] == ["BACKCHANNEL_API_KEY"]
    assert hermes_env(hermes_home)["BACKCHANNEL_API_KEY"] != env["BACKCHANNEL_API_KEY"]
    assert (hermes_home / "config.yaml").read_text().count("backchannel") == 3  # enabled, entries, the toolset


def test_connect_makes_a_missing_profile_in_that_hermes_gateway(initialised: Path, hermes_home: Path) -> None:
    (hermes_home / ".env").write_text("API_SERVER_PORT=8765\n")  # its API server has no key yet
    said = run_cli("hermes", "connect", "builds", "--hermes-home", str(hermes_home))
    assert said.exit_code == 0 and "Traceback" not in said.stderr, said.stderr
    assert "profile builds: made, engine hermes at http://127.0.0.1:8765" in said.stdout
    assert "hermes gateway restart" in said.stdout
    out = connect("builds", "--hermes-home", str(hermes_home))
    assert out["key_was"] == "reused" and out["profile_made"] is None
    made = json.loads(run_cli("profile", "show", "builds", "--json").stdout)
    assert made["engine"] == "hermes" and made["base_url"] == "http://127.0.0.1:8765"
    env = hermes_env(hermes_home)
    assert env["API_SERVER_ENABLED"] == "true" and len(env["API_SERVER_KEY"]) >= 16
    assert config.read_env(initialised)[made["api_key_env"]] == env["API_SERVER_KEY"]  # Backchannel drives Hermes


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda home: None, "no such folder"),
        (lambda home: home.write_text("x"), "is a file"),
        (lambda home: home.mkdir(), "does not look like a Hermes home"),
    ],
)
def test_a_hermes_home_that_is_not_there_is_a_clear_error(
    initialised: Path, tmp_path: Path, make: Any, says: str
) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    where = tmp_path / "not-hermes"
    make(where)
    done = run_cli("hermes", "connect", "research", "--hermes-home", str(where), "--json")
    assert done.exit_code == 2 and "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "no_hermes_home" and says in error["message"]
    assert json.loads(run_cli("key", "list", "--json").stdout) == []  # nothing made
    missing = run_cli("hermes", "connect", "research")
    assert missing.exit_code == 2 and "--hermes-home" in missing.stderr


def test_the_connected_key_acts_as_its_profiles_sessions_and_nothing_else(
    gateway: GatewayThread, hermes_home: Path
) -> None:
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    connect("research", "--hermes-home", str(hermes_home), "--url", gateway.url)
    env = hermes_env(hermes_home)
    assert env["BACKCHANNEL_URL"] == gateway.url
    person = httpx.Client(base_url=gateway.url, headers=gateway.headers(), timeout=30.0, trust_env=False)
    session = person.post("/p/research/api/sessions", json={"title": "work"}).json()["session"]["id"]
    other = person.post("/p/builds/api/sessions", json={"title": "work"}).json()["session"]["id"]
    agent = as_key(gateway, env["BACKCHANNEL_API_KEY"])
    send = {"arguments": {"session_id": "builds", "message": "status?", "wait_seconds": 20}}

    # As its profile's session: research's rules apply (deny by default), then allowed.
    refused = agent.post(f"/p/research/api/sessions/{session}/tools/send_to_session", json=send)
    assert refused.status_code == 200, refused.text
    result = refused.json()["result"]
    assert result["result"] == "refused" and result["error"]["code"] == "not_allowed"
    set_messaging(gateway.root, "research", allow=["builds"])
    sent = agent.post(f"/p/research/api/sessions/{session}/tools/send_to_session", json=send)
    assert sent.status_code == 200 and sent.json()["result"]["result"] == "delivered", sent.text
    mentioned = agent.post(f"/p/research/api/sessions/{session}/mentions", json={"message": "@session:builds hi"})
    assert mentioned.status_code == 200 and mentioned.json()["mentions"] == 1, mentioned.text
    ledger = person.get("/v1/ledger").json()["data"]
    assert any(e["sender"].startswith("research/") and e["target"].startswith("builds/") for e in ledger)

    # Anything else: 403 agent_key_scope, whatever a peer's key could do.
    for method, path, body in [
        ("POST", f"/p/builds/api/sessions/{other}/tools/send_to_session", send),
        ("POST", f"/p/builds/api/sessions/{other}/mentions", {"message": "@session:research hi"}),
        ("POST", f"/api/sessions/{session}/tools/list_sessions", {"arguments": {}}),  # the root is default's
        ("GET", "/v1/ledger", None),
        ("GET", "/p/research/v1/ledger", None),
        ("GET", "/v1/held", None),
        ("POST", "/v1/held/run_x/approve", {}),
        ("POST", "/v1/held/run_x/deny", {}),
        ("POST", "/v1/gateway/stop", {}),
        ("GET", "/p/research/api/sessions", None),
        ("POST", f"/p/research/api/sessions/{session}/chat", {"message": "hi"}),
        ("POST", "/p/research/v1/runs", {"input": "hi"}),
        ("POST", "/v1/messages", {"to": "builds", "message": "hi"}),
        ("POST", "/v1/peers/spark/messages", {"message": "hi"}),
        ("GET", "/v1/rooms", None),
        ("GET", "/metrics", None),
        ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
    ]:
        answer = agent.request(method, path, json=body)
        assert answer.status_code == 403, (method, path, answer.status_code, answer.text)
        assert answer.json()["error"]["code"] == "agent_key_scope", (method, path, answer.text)
    assert gateway.running()

    # Rotated: the old value is refused at once (401), the new one works.
    connect("research", "--hermes-home", str(hermes_home), "--url", gateway.url, "--rotate")
    old = agent.post(f"/p/research/api/sessions/{session}/tools/list_sessions", json={"arguments": {}})
    assert old.status_code == 401
    new = as_key(gateway, hermes_env(hermes_home)["BACKCHANNEL_API_KEY"])
    listed = new.post(f"/p/research/api/sessions/{session}/tools/list_sessions", json={"arguments": {}})
    assert listed.status_code == 200, listed.text


def test_a_peers_key_still_cannot_call_a_sessions_tools(gateway: GatewayThread) -> None:
    made = json.loads(run_cli("key", "create", "spark", "--json").stdout)["key"]
    answer = as_key(gateway, made).post("/api/sessions/x/tools/list_sessions", json={"arguments": {}})
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"


def test_the_restart_line_is_typed_as_each_shell_reads_a_windows_or_posix_path() -> None:
    windows = restart_hint(PureWindowsPath(r"C:\Users\me o'neil\.hermes"), windows=True)
    assert r"set HERMES_HOME=C:\Users\me o'neil\.hermes  (PowerShell: $env:HERMES_HOME = " in windows
    assert r"'C:\Users\me o''neil\.hermes'" in windows and "hermes gateway restart" in windows
    posix = restart_hint(PurePosixPath("/home/me/hermes home"), windows=False)
    assert "HERMES_HOME='/home/me/hermes home' hermes gateway restart" in posix


def test_doctor_checks_each_connected_hermes_home(initialised: Path, hermes_home: Path) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    connect("research", "--hermes-home", str(hermes_home))

    def hermes_check() -> dict[str, Any]:
        report = json.loads(run_cli("doctor", "--json").stdout)
        found: dict[str, Any] = next(c for c in report["checks"] if c["check"] == "hermes research")
        return found

    assert hermes_check()["status"] == "ok"
    cfg = hermes_home / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: off", "enabled: auto"))  # the person turned the search on
    searching = hermes_check()
    assert searching["status"] == "warn" and "tool_call" in searching["detail"], searching
    assert "tools.tool_search.enabled: off" in searching["fix"]
    kept = connect("research", "--hermes-home", str(hermes_home), "--keep-tool-search")
    assert kept["config_added"] == [] and config.load_yaml(cfg)["tools"]["tool_search"]["enabled"] == "auto"
    connect("research", "--hermes-home", str(hermes_home))
    assert config.load_yaml(cfg)["tools"]["tool_search"]["enabled"] in (False, "off")
    assert hermes_check()["status"] == "ok"
    assert run_cli("key", "rotate", "hermes-research").exit_code == 0  # the home's .env now holds a dead key
    stale = hermes_check()
    assert stale["status"] == "fail" and "hermes connect research" in stale["fix"]
