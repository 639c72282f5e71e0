"""Interop with a real Hermes Agent gateway (API server only), each version, on the scripted model: `make interop`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hermes_gateway import HERMES_19, HermesGateway, HermesPython, each_hermes

from conftest import run_cli
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop
pytest_generate_tests = each_hermes  # hermes_python: each test on each Hermes version
KEY = "interop-key-0123456789abcdef"


def echo_model(body: dict[str, Any]) -> str:
    last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    text = last if isinstance(last, str) else json.dumps(last)
    return f"hermes heard: {text.splitlines()[-1]}"


def test_peer_verbs_against_a_hermes_gateway(initialised: Path, hermes_python: HermesPython) -> None:
    with (
        ScriptedModel(echo_model) as model,
        HermesGateway(model.base_url, api_key=KEY, python=hermes_python) as hermes,
    ):
        added = run_cli("peer", "add", "herm", "--url", hermes.url, "--key", KEY)
        assert added.exit_code == 0, added.stderr
        assert "hermes-agent" in added.stderr

        first = run_cli("peer", "dm", "herm", "first question", "--json")
        assert first.exit_code == 0, first.stderr
        one = json.loads(first.stdout)
        assert one["result"] == "delivered" and one["reply"] == "hermes heard: first question"
        second = json.loads(run_cli("peer", "dm", "herm", "second question", "--json").stdout)
        assert second["result"] == "delivered" and second["session_id"] == one["session_id"]

        # Both landed in the one Bot Chat over there (Hermes ignores the title filter; we filter ourselves).
        listing = httpx.get(f"{hermes.url}/api/sessions?limit=200", headers=hermes.headers).json()["data"]
        assert [s["id"] for s in listing if s["title"] == "Bot Chat"] == [one["session_id"]]
        messages = httpx.get(f"{hermes.url}/api/sessions/{one['session_id']}/messages", headers=hermes.headers)
        said = [m["content"] for m in messages.json()["data"] if m["role"] == "user"]
        assert said == ["first question", "second question"]

        started = run_cli("peer", "run", "herm", "a longer task", "--json")
        assert started.exit_code == 0, started.stderr
        if hermes_python is HERMES_19:  # it says what Hermes lacks
            assert "restart-durable" in started.stderr and "0.19" in started.stderr
        else:  # later ones advertise restart-durable runs that load the session's history: nothing to say
            assert started.stderr == ""
        run = json.loads(started.stdout)
        assert run["session_id"] == one["session_id"] and run["run_id"].startswith("run_")

        followed = run_cli("peer", "status", "herm", run["run_id"], "--follow", "--json")
        assert followed.exit_code == 0, followed.stderr
        status = json.loads(followed.stdout)
        assert status["status"] == "completed" and status["output"] == "hermes heard: a longer task"

        stopped = run_cli("peer", "stop", "herm", run["run_id"])
        if hermes_python is HERMES_19:  # Hermes 0.19 forgets runs' stop once they end: a clear error, not a crash.
            assert stopped.exit_code == 1 and "Traceback" not in stopped.stderr
        else:  # later ones keep the run: stopping one that ended tells how it ended
            assert stopped.exit_code == 0 and "completed" in stopped.stdout, stopped
        assert KEY not in added.stdout + added.stderr + first.stdout + started.stdout + followed.stdout


def test_wrong_key_and_unknown_run_against_hermes(initialised: Path, hermes_python: HermesPython) -> None:
    with (
        ScriptedModel(echo_model) as model,
        HermesGateway(model.base_url, api_key=KEY, python=hermes_python) as hermes,
    ):
        run_cli("peer", "add", "herm", "--url", hermes.url, "--key", "not-the-right-key")
        wrong = run_cli("peer", "dm", "herm", "hello")
        assert wrong.exit_code == 1 and "key" in wrong.stderr
        run_cli("peer", "add", "herm", "--url", hermes.url, "--key", KEY)
        unknown = run_cli("peer", "status", "herm", "run_0000")
        assert unknown.exit_code == 1 and "unknown" in unknown.stdout
