"""`backchannel hermes connect` with real Hermes gateways (0.19 and 0.22): the seed's set-up (two Hermes homes, two
profiles, one allow rule) is one command per Hermes home and one allow rule, and a Hermes session's
`send_to_session` goes through the plugin with the key connect wrote into that home's .env (never the person's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hermes_gateway import HermesGateway, HermesPython, base_config, each_hermes
from test_hermes_sessions import Agent, builds_decides, ledger, research_decides, send

from conftest import GatewayThread, api_key, free_port, run_cli
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop
pytest_generate_tests = each_hermes


def hermes_home(where: Path, name: str, model_url: str, port: int) -> Path:
    """A Hermes home as its person set it up: a model, a SOUL.md, its API server on (in .env), and Hermes's own
    tool search as it comes (on from 0.22, where it hides every plugin's tools): connect is what turns it off."""
    home = where / f"hermes-{name}"
    home.mkdir()
    config = base_config(model_url)
    config.pop("tools")  # its one key: the tool search, off for every other test
    (home / "config.yaml").write_text(json.dumps(config, indent=2))
    (home / "SOUL.md").write_text(f"You are {name}. {name.upper()}-SOUL")
    (home / ".env").write_text(
        f"API_SERVER_ENABLED=true\nAPI_SERVER_KEY=interop-{name}-key-0123456789\nAPI_SERVER_PORT={port}\n"
    )
    return home


def connect(profile: str, home: Path) -> dict[str, Any]:
    done = run_cli("hermes", "connect", profile, "--hermes-home", str(home), "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_two_connected_hermes_homes_message_each_other_with_their_own_keys(
    gateway: GatewayThread, tmp_path: Path, hermes_python: HermesPython
) -> None:
    research, builds = Agent("research", research_decides), Agent("builds", builds_decides)
    with ScriptedModel(research) as research_model, ScriptedModel(builds) as builds_model:
        homes: dict[str, tuple[Path, int, str]] = {}
        for name, model in (("research", research_model), ("builds", builds_model)):
            port = free_port()
            home = hermes_home(tmp_path, name, model.base_url, port)
            out = connect(name, home)  # one command per Hermes home
            assert out["profile_made"]["base_url"] == f"http://127.0.0.1:{port}" and out["key_was"] == "made"
            homes[name] = (home, port, model.base_url)
        assert run_cli("profile", "allow", "research", "builds").exit_code == 0  # and one allow rule

        with (
            HermesGateway(homes["research"][2], api_key="interop-research-key-0123456789",
                          home=homes["research"][0], port=homes["research"][1], python=hermes_python),
            HermesGateway(homes["builds"][2], api_key="interop-builds-key-0123456789",
                          home=homes["builds"][0], port=homes["builds"][1], python=hermes_python),
        ):  # fmt: skip
            asked = send("research", "ask builds what is the build status?")
            assert asked["result"] == "delivered", asked
            reply = asked["reply"]
            assert reply.startswith("research got:") and "builds answers 'what is the build status?'" in reply
            assert "BUILDS-SOUL" in reply
            offered = [t["function"]["name"] for t in research.bodies[0].get("tools", [])]
            assert "send_to_session" in offered and "tool_search" not in offered, offered  # by name, at hand

            # Builds' own rules: it may message nobody, and the plugin's call with builds' key says so.
            refused = send("builds", "ask research whether this is right")
            assert "not_allowed" in refused["reply"], refused

    states = [(e["sender"].split("/")[0], e["target"].split("/")[0], e["state"]) for e in ledger(gateway)]
    assert ("research", "builds", "completed") in states
    assert ("builds", "research", "refused:not_allowed") in states
    person = api_key(gateway.root)
    for home, _, _ in homes.values():
        assert person not in (home / ".env").read_text()
    keys = {k["name"]: k for k in json.loads(run_cli("key", "list", "--json").stdout)}
    assert keys["hermes-research"]["last_used_at"] is not None and keys["hermes-builds"]["last_used_at"] is not None
