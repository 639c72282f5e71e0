"""Config files as they are loaded: an unknown key is a warning naming it, the file and the closest valid key;
Hermes keys are ignored quietly; an empty home config.yaml is an error and `init --repair` rewrites it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backchannel.home import config
from conftest import GatewayProcess, api_key, free_port, run_cli


def _profile_cfg(home: Path, name: str = "default") -> Path:
    return home / "profiles" / name / "config.yaml"


def test_an_unknown_profile_key_warns_once_naming_the_file_and_the_closest_key(initialised: Path) -> None:
    cfg = _profile_cfg(initialised)
    cfg.write_text(cfg.read_text().replace("    allow: []", "    alow: []"))
    result = run_cli("send", "default", "hello", "--json")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr  # the profile is loaded more than once, warned once
    assert "'agent.session_messaging.alow'" in warnings[0]
    assert "did you mean 'agent.session_messaging.allow'" in warnings[0]
    assert str(cfg) in warnings[0]
    assert json.loads(result.stdout)["result"] == "delivered"  # a warning, not an error: stdout stays JSON


def test_a_key_at_the_wrong_level_is_pointed_to_where_it_belongs(initialised: Path) -> None:
    cfg = _profile_cfg(initialised)
    cfg.write_text(cfg.read_text() + "max_hops: 3\n")
    result = run_cli("profile", "show", "default")
    assert result.exit_code == 0, result.stderr
    assert "unknown key 'max_hops' (did you mean 'agent.session_messaging.max_hops'?)" in result.stderr


def test_hermes_keys_in_a_profile_do_not_warn(initialised: Path) -> None:
    cfg = _profile_cfg(initialised)
    hermes = "toolsets: [hermes-cli]\nterminal: {backend: local}\ndisplay: {skin: default}\n"
    cfg.write_text(cfg.read_text().replace("  engine: echo\n", "  engine: echo\n  provider: custom\n") + hermes)
    result = run_cli("profile", "show", "default")
    assert result.exit_code == 0, result.stderr
    assert "warning" not in result.stderr


def test_an_unknown_home_key_warns_once_per_command(initialised: Path) -> None:
    cfg = config.config_path(initialised)
    cfg.write_text(cfg.read_text().replace("  port: 8377", "  prot: 8377"))
    for args in (["peer", "list"], ["send", "default", "hi"]):  # send reads config.yaml more than once
        cfg.write_text(cfg.read_text() + "\n")  # a new version of the file warns again
        result = run_cli(*args)
        assert result.exit_code == 0, result.stderr
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1, (args, result.stderr)
        assert "'gateway.prot' (did you mean 'gateway.port'?)" in warnings[0] and str(cfg) in warnings[0]


def test_the_gateway_logs_an_unknown_key(initialised: Path) -> None:
    gw = GatewayProcess(initialised, free_port())
    cfg = config.config_path(initialised)
    cfg.write_text(cfg.read_text().replace("  port: 8377", f"  port: {gw.port}\n  max_turns_total: 5"))
    gw.start().kill()
    assert "unknown key 'gateway.max_turns_total'" in gw.log()


def test_an_empty_home_config_is_an_error_that_says_how_to_repair_it(initialised: Path) -> None:
    cfg = config.config_path(initialised)
    cfg.write_text("")
    for args in (["peer", "list"], ["send", "default", "hi"], ["init"]):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.stderr)
        assert str(cfg) in result.stderr and "backchannel init --repair" in result.stderr, args
        assert "Traceback" not in result.stderr
    assert cfg.read_text() == ""  # init without --repair changes nothing


@pytest.mark.sqlite  # compares state.db's bytes
def test_init_repair_keeps_the_gateway_id_the_peers_the_key_and_the_store(initialised: Path) -> None:
    assert run_cli("send", "default", "before the damage").exit_code == 0
    added = run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:9", "--key", "spark-key-123456")
    assert added.exit_code == 0, added.stderr
    cfg = config.config_path(initialised)
    gateway_id = config.load_gateway_config(initialised).gateway_id
    env_before = (initialised / ".env").read_text()
    db_before = (initialised / "state.db").read_bytes()
    # truncated: the gateway section lost everything but its id's line, the peers survive
    cfg.write_text(f"peers:\n  spark:\n    url: http://127.0.0.1:9\ngateway:\n  id: {gateway_id}\n  port: [8377\n")
    assert run_cli("peer", "list").exit_code == 2
    repaired = run_cli("init", "--repair", "--json")
    assert repaired.exit_code == 0, repaired.stderr
    report = json.loads(repaired.stdout)["repaired"]
    assert f"gateway id {gateway_id}" in report["kept"] and Path(report["backup"]).exists()
    assert config.load_gateway_config(initialised).gateway_id == gateway_id
    assert (initialised / ".env").read_text() == env_before
    assert (initialised / "state.db").read_bytes() == db_before
    listed = run_cli("peer", "list", "--json")  # unparseable YAML: only the id could be read
    assert listed.exit_code == 0, listed.stderr


def test_init_repair_keeps_readable_peers_and_settings(initialised: Path) -> None:
    key = api_key(initialised)
    cfg = config.config_path(initialised)
    peers = "peers:\n  spark: {url: 'http://127.0.0.1:9', note: lab}\n  Bad Name: {url: 5}\n"
    cfg.write_text(peers + "gateway:\n  port: 8390\n")
    result = run_cli("init")
    assert result.exit_code == 2 and "init --repair" in result.stderr
    repaired = run_cli("init", "--repair")
    assert repaired.exit_code == 0, repaired.stderr
    assert "kept peer spark" in repaired.stdout and "Bad Name" in repaired.stderr
    settings = config.load_gateway_config(initialised)
    assert settings.port == 8390 and settings.gateway_id.startswith("gw-")
    assert settings.peers["spark"].note == "lab" and set(settings.peers) == {"spark"}
    assert api_key(initialised) == key
    again = run_cli("init", "--repair")
    assert again.exit_code == 0 and "nothing to repair" in again.stderr


def test_init_repair_keeps_a_shared_store_and_a_peers_urls(initialised: Path) -> None:
    """Without its store.url a home would start on a new, empty state.db: a repair keeps it, and the URLs a peer's
    other gateways are at."""
    cfg = config.config_path(initialised)
    cfg.write_text(
        "store: {url: 'postgresql://bc@db.lan:5432/bc', lease_seconds: 9, colour: blue}\n"
        "peers:\n  team: {url: 'http://gw1.lan:8377', failover_urls: ['http://gw2.lan:8377']}\n"
        "gateway:\n  id: gw-kept\n  max_attempts: lots\n"
    )
    repaired = run_cli("init", "--repair", "--json")
    assert repaired.exit_code == 0, repaired.stderr
    report = json.loads(repaired.stdout)["repaired"]
    assert {"store.url", "store.lease_seconds", "peer team"} <= set(report["kept"])
    assert "store.colour (not a setting)" in report["dropped"]
    settings = config.load_gateway_config(initialised)
    assert (settings.store.url, settings.store.lease_seconds) == ("postgresql://bc@db.lan:5432/bc", 9)
    assert settings.peers["team"].failover_urls == ["http://gw2.lan:8377"]


def test_an_empty_profile_config_means_the_defaults(initialised: Path) -> None:
    _profile_cfg(initialised).write_text("")
    shown = run_cli("profile", "show", "default", "--json")
    assert shown.exit_code == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["engine"] == "echo" and data["session_messaging"]["allow"] == []


def _no_pydantic_dump(text: str) -> None:
    assert "Traceback" not in text and "validation error" not in text and "pydantic" not in text, text


def test_a_misspelt_nested_key_warns_with_the_key_it_is_meant_to_be(initialised: Path) -> None:
    cfg = config.config_path(initialised)
    cfg.write_text(cfg.read_text().replace("gateway:\n", "gateway:\n  a2a:\n    push_alow_private: true\n", 1))
    result = run_cli("peer", "list")
    assert result.exit_code == 0, result.stderr
    expected = "unknown key 'gateway.a2a.push_alow_private' (did you mean 'gateway.a2a.push_allow_private'?)"
    assert expected in result.stderr and str(cfg) in result.stderr
    assert config.load_gateway_config(initialised).push.allow_private is False  # ignored, not read as meant
    doctor = json.loads(run_cli("doctor", "--json").stdout)
    [check] = [c for c in doctor["checks"] if c["check"] == "config.yaml"]
    assert check["status"] == "fail" and "rename it to 'gateway.a2a.push_allow_private'" in check["fix"], check


def test_a_misspelt_key_that_leaves_a_value_missing_is_named_in_the_error(initialised: Path) -> None:
    cfg = _profile_cfg(initialised)
    cfg.write_text(cfg.read_text() + "mcp_servers:\n  files:\n    comand: mcp-server-filesystem\n")
    result = run_cli("profile", "show", "default")
    assert result.exit_code == 2
    assert f"{str(cfg)!r} line " in result.stderr, result.stderr
    assert ": mcp_servers.files needs either 'command' (stdio) or 'url'" in result.stderr, result.stderr
    assert "(did you mean 'mcp_servers.files.command'?)" in result.stderr, result.stderr
    _no_pydantic_dump(result.stderr)


def test_a_value_of_the_wrong_kind_is_an_error_naming_the_file_its_line_and_the_key_path(initialised: Path) -> None:
    cfg = _profile_cfg(initialised)
    cfg.write_text(cfg.read_text().replace("max_hops: 6", "max_hops: three"))
    line = next(n for n, text in enumerate(cfg.read_text().splitlines(), 1) if "max_hops" in text)
    # `send` is answered by the gateway (in this process when none runs), whose errors name the home's files
    # under $BACKCHANNEL_HOME; the command then says which home that is.
    shown = "$BACKCHANNEL_HOME/" + cfg.relative_to(initialised).as_posix()
    for args, named in ((["profile", "show", "default"], str(cfg)), (["send", "default", "hi"], shown)):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.stderr)
        message = f"{named!r} line {line}: agent.session_messaging.max_hops must be a non-negative integer"
        assert message in result.stderr, result.stderr
        assert named == str(cfg) or f"note: $BACKCHANNEL_HOME is this home, {str(initialised)!r}" in result.stderr
        _no_pydantic_dump(result.stderr)
    home = config.config_path(initialised)
    home.write_text(
        home.read_text().replace("  max_concurrent_turns: 32\n", "  max_concurrent_turns: 32\n  max_headers: yes\n")
    )
    result = run_cli("peer", "list")
    assert result.exit_code == 2
    assert f"{str(home)!r} line " in result.stderr, result.stderr
    assert ": gateway.max_headers must be a positive integer, got True" in result.stderr, result.stderr
    _no_pydantic_dump(result.stderr)


def test_a_file_or_a_section_with_nothing_in_it_means_the_defaults(initialised: Path) -> None:
    cfg = _profile_cfg(initialised)
    for text in ("model:\nagent:\n  session_messaging:\nmcp_servers:\n", "---\n", "# nothing yet\n"):
        cfg.write_text(text)
        shown = run_cli("profile", "show", "default", "--json")
        assert shown.exit_code == 0, (text, shown.stderr)
        data = json.loads(shown.stdout)
        assert data["engine"] == "echo" and data["session_messaging"]["allow"] == [], (text, data)
        assert "warning" not in shown.stderr, shown.stderr
    doctor = json.loads(run_cli("doctor", "--json").stdout)
    [check] = [c for c in doctor["checks"] if c["check"] == "profile default"]
    assert check["status"] == "warn" and "the defaults apply" in check["detail"], check
