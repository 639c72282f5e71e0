"""A request to a real Hermes gateway (each version) cut after it was sent (a proxy drops the answer).

Hermes cannot deduplicate a chat on its key, so our side never asks it again blindly: the outcome is
`unknown`, naming the session to check, and Hermes ran the turn exactly once.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from hermes_gateway import HermesGateway, HermesPython, each_hermes

from bad_servers import CuttingProxy
from conftest import run_cli
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop
pytest_generate_tests = each_hermes  # hermes_python: each test on each Hermes version
KEY = "interop-key-0123456789abcdef"


def test_a_dropped_answer_from_hermes_is_unknown_with_the_session_to_check(
    initialised: Path, hermes_python: HermesPython
) -> None:
    with (
        ScriptedModel(lambda body: "hermes answered once") as model,
        HermesGateway(model.base_url, api_key=KEY, python=hermes_python) as hermes,
        CuttingProxy(hermes.url, cut=1) as proxy,
    ):
        added = run_cli("peer", "add", "herm", "--url", proxy.url, "--key", KEY, "--timeout", "20")
        assert added.exit_code == 0, added.stderr
        result = run_cli("peer", "dm", "herm", "cut hermes off", "--idempotency-key", "herm-cut-1", "--json")
        assert result.exit_code == 1, (result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        body = json.loads(result.stdout)
        assert body["result"] == "unknown" and body["idempotency_key"] == "herm-cut-1", body
        session = body["session_id"]
        assert session and session in body["error"]["message"], body  # the session to check
        assert proxy.chats == 1  # never resent to a peer that cannot deduplicate

        messages = httpx.get(f"{hermes.url}/api/sessions/{session}/messages", headers=hermes.headers).json()["data"]
        said = [m for m in messages if m["role"] == "user" and "cut hermes off" in str(m["content"])]
        replies = [m for m in messages if m["role"] == "assistant" and m["content"] == "hermes answered once"]
        assert len(said) == 1 and len(replies) == 1, messages  # the turn ran once over there
        asked = [r for r in model.requests if "cut hermes off" in json.dumps(r)]
        assert len(asked) == 1, len(asked)
