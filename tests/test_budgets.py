"""Token and cost budgets (issue 25): what each run's model calls used and cost, and the sends refused past a budget.

Through the real CLI (and a gateway of this home for the ping-pong): the echo engine counts words, so every
figure here is exact offline; the openai engine reads the usage its server reports (the scripted server's last
stream chunk); `model.prices` turns tokens into dollars; `agent.session_messaging.budget` refuses an agent's send
past it (`budget_exhausted`, naming the budget and what was spent) and never the person's message; the ledger
shows tokens per run and adds them up per exchange and per pair per day.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from backchannel.home import config
from conftest import run_cli
from gateway_http import gateway_with, set_messaging
from scripted_model import ScriptedModel


def set_profile(root: Path, profile: str, section: str, **keys: Any) -> None:
    path = root / "profiles" / profile / "config.yaml"
    data = config.load_yaml(path)
    data.setdefault(section, {}).update(keys)
    config.write_yaml(path, data)


def run_json(run_id: str) -> dict[str, Any]:
    shown = run_cli("runs", "show", run_id, "--json")
    return dict(json.loads(shown.stdout))


def tool_result(done: Any, tool: str = "send_to_session") -> dict[str, Any]:
    assert done.exit_code == 0, done.stderr
    reply = json.loads(done.stdout)["reply"]
    return dict(json.loads(reply.split(f"→ {tool}: ", 1)[1]))


def test_a_run_records_the_words_the_echo_engine_read_and_wrote_and_their_cost(initialised: Path) -> None:
    assert run_cli("profile", "create", "lead").exit_code == 0
    set_profile(initialised, "lead", "model", prices={"input_per_mtok": 2.0, "output_per_mtok": 4.0})
    done = run_cli("send", "lead", "three little words", "--json")
    assert done.exit_code == 0, done.stderr
    run = run_json(json.loads(done.stdout)["run_id"])
    assert run["tokens_out"] == len(["lead", "(echo):", "three", "little", "words"])
    assert run["tokens_in"] >= 3  # the framed message: its provenance line and the three words
    assert run["cost_usd"] == pytest.approx((run["tokens_in"] * 2.0 + run["tokens_out"] * 4.0) / 1e6)
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    assert (ledger[0]["tokens_in"], ledger[0]["tokens_out"]) == (run["tokens_in"], run["tokens_out"])


def test_the_openai_engine_records_the_usage_its_server_reports(initialised: Path) -> None:
    script = [
        {
            "tool_calls": [{"name": "list_sessions", "arguments": {}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 7},
        },
        {"content": "done", "usage": {"prompt_tokens": 150, "completion_tokens": 3}},
    ]
    with ScriptedModel(script) as model:
        made = run_cli("profile", "create", "tiny", "--engine", "openai", "--base-url", model.base_url)
        assert made.exit_code == 0, made.stderr
        done = run_cli("send", "tiny", "hi", "--json")
    assert done.exit_code == 0, done.stderr
    assert all(body["stream_options"] == {"include_usage": True} for body in model.requests)
    run = run_json(json.loads(done.stdout)["run_id"])
    assert (run["tokens_in"], run["tokens_out"]) == (270, 10)  # both model calls of the turn


def volley(hops: int) -> str:
    """A person's message that makes lead and builds message each other `hops` times without waiting: each
    message is the tool call that sends the next one on."""
    message = "rally"
    for hop in reversed(range(hops)):
        target = "builds" if hop % 2 == 0 else "lead"
        message = "/tool send_to_session " + json.dumps({"session_id": target, "message": message, "wait_seconds": 0})
    return message


def test_a_ping_pong_stops_at_its_exchange_budget(initialised: Path) -> None:
    for name, other in (("lead", "builds"), ("builds", "lead")):
        assert run_cli("profile", "create", name).exit_code == 0
        set_messaging(initialised, name, allow=[other], budget={"tokens_per_exchange": 600})
    with gateway_with(initialised):
        done = run_cli("send", "lead", volley(6), "--json")
        assert done.exit_code == 0, done.stderr
        origin = json.loads(done.stdout)["run_id"]
        deadline = time.monotonic() + 30
        while True:  # until the exchange has settled: a refusal, and nothing left queued or running
            ledger = json.loads(run_cli("ledger", "--json", "--limit", "200").stdout)
            refused = [e for e in ledger if e["state"] == "refused:budget_exhausted"]
            busy = [e for e in ledger if e["kind"] == "run" and e["state"] in ("queued", "running")]
            if refused and not busy:
                break
            assert time.monotonic() < deadline, ledger
            time.sleep(0.2)
    ours = [e for e in ledger if e["origin"] == origin]
    assert "rally" not in [e["message"] for e in ours]  # the last hops were never sent
    spent = sum(e["tokens_in"] + e["tokens_out"] for e in ours)
    assert spent >= 600
    reason = refused[-1]["reason"]  # the first refusal (the ledger is newest first) names what was spent
    assert "tokens_per_exchange 600" in reason and "this exchange already used" in reason, reason
    used = int(reason.split("already used ", 1)[1].split(" tokens", 1)[0].replace(",", ""))
    assert 600 <= used <= spent
    totals = json.loads(run_cli("ledger", "--totals", "--json").stdout)
    exchange = next(x for x in totals["exchanges"] if x["exchange"] == origin)
    assert exchange["tokens_in"] + exchange["tokens_out"] == spent and exchange["runs"] == len(ours)
    pairs = {(p["from"], p["to"]): p for p in totals["pairs"]}
    assert ("lead", "builds") in pairs and ("builds", "lead") in pairs and ("human:cli", "lead") in pairs


def test_a_daily_budget_refuses_the_agents_sends_never_the_persons_message(initialised: Path) -> None:
    for name in ("lead", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "lead", allow=["builds"], budget={"tokens_per_day": 40})
    assert run_cli("send", "lead", " ".join(["word"] * 30)).exit_code == 0  # 30 words in, 32 out
    asked = run_cli("send", "lead", "/send builds are you there?", "--json")
    assert asked.exit_code == 0  # the person's own message is never refused by a budget
    result = tool_result(asked)
    assert result["result"] == "refused" and result["error"]["code"] == "budget_exhausted", result
    assert "in the last 24 hours" in result["error"]["message"] and "tokens_per_day 40" in result["error"]["message"]
    assert not json.loads(run_cli("runs", "list", "-p", "builds", "--json").stdout)  # builds got nothing

    set_messaging(initialised, "lead", budget={"usd_per_day": 0.5})
    set_profile(initialised, "lead", "model", prices={"input_per_mtok": 10_000.0, "output_per_mtok": 10_000.0})
    assert run_cli("send", "lead", "/send builds one").exit_code == 0  # spent before: no dollars yet
    priced = tool_result(run_cli("send", "lead", "/send builds two", "--json"))
    assert priced["error"]["code"] == "budget_exhausted" and "usd_per_day $0.50" in priced["error"]["message"], priced


@pytest.mark.parametrize(
    ("section", "keys", "named"),
    [
        ("agent", {"session_messaging": {"budget": {"tokens_per_day": "lots"}}}, "tokens_per_day"),
        ("agent", {"session_messaging": {"budget": {"usd_per_day": -1}}}, "usd_per_day"),
        ("model", {"prices": {"input_per_mtok": "cheap"}}, "input_per_mtok"),
    ],
)
def test_a_budget_or_price_that_is_not_a_number_is_a_config_error(
    initialised: Path, section: str, keys: dict[str, Any], named: str
) -> None:
    assert run_cli("profile", "create", "lead").exit_code == 0
    set_profile(initialised, "lead", section, **keys)
    done = run_cli("send", "lead", "hi")
    assert done.exit_code == 2, done.stdout
    assert named in done.stderr and "config.yaml" in done.stderr and "line" in done.stderr, done.stderr
