"""Backchannel's own part of every model call (its note in the system prompt, the tool schemas) stays small.

A small local model pays for each token before the person's first word (issue 13): the persona, memories
and skills are the profile's own and kept whole; what Backchannel adds is pinned here by characters, and
by the real server's token count in tests/interop/test_llama_interop.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from gateway_http import set_messaging
from scripted_model import ScriptedModel

# 3,304 before issue 13 shortened the note and the tool descriptions, 2,392 after; 2,561 once every argument
# of every tool was described (issue 21: hosts show them), mostly the JSON keys: 802 → 848 tokens on llama.cpp.
# 2,958 with the teams (issue 25): `group:NAME` in send_to_session's address (+14), the notify_when_idle tool
# (+280 of schema: the price of a tool) and send_to_session's `mode` (queue or steer, +103).
# About 3,190 with ask_person (issue 42, +446 of schema: the price of a tool), its parameters in as few words as can be.
OWN_CHARS_BOUND = 3250
SOUL = "You are Tiny."


def test_backchannels_own_prompt_stays_under_its_bound(initialised: Path) -> None:
    with ScriptedModel(["ok"]) as model:
        created = run_cli("profile", "create", "tiny", "--engine", "openai", "--base-url", model.base_url)
        assert created.exit_code == 0, created.stderr
        (initialised / "profiles/tiny/SOUL.md").write_text(SOUL + "\n")
        result = run_cli("chat", "-p", "tiny", "-q", "hi")
        assert result.exit_code == 0, result.stderr
    body = model.requests[0]
    system = body["messages"][0]["content"]
    assert system.startswith(SOUL)  # the persona comes whole, first
    own = len(system) - len(SOUL) + len(json.dumps(body["tools"]))
    assert {t["function"]["name"] for t in body["tools"]} >= {"memory", "send_to_session", "check_message"}
    assert own <= OWN_CHARS_BOUND, f"Backchannel's own prompt grew to {own} characters"


def test_the_send_tools_offer_their_options_only_to_a_profile_that_opts_in(initialised: Path) -> None:
    """A small model offered wait_seconds and mode misuses them (a wait of 0, a steer, then an answer it made up):
    send_to_session offers what a model needs, and the options where the profile's send_options asks. send_to_peer's
    run_id (an answer to a peer's question) only where the profile may message a peer: nowhere else can it serve."""

    def offered(profile: str) -> dict[str, set[str]]:
        with ScriptedModel(["ok"]) as model:
            made = run_cli("profile", "create", profile, "--engine", "openai", "--base-url", model.base_url)
            assert made.exit_code == 0, made.stderr
            if profile == "opted":
                set_messaging(initialised, profile, send_options=["wait_seconds", "mode"])
            if profile == "peered":  # may message a peer: may be asked by its agent, and answer with run_id
                set_messaging(initialised, profile, allow=["peer:spark"])
            assert run_cli("chat", "-p", profile, "-q", "hi").exit_code == 0
        tools = model.requests[0]["tools"]
        return {t["function"]["name"]: set(t["function"]["parameters"]["properties"]) for t in tools}

    plain = offered("plain")
    assert plain["send_to_session"] == {"session_id", "message"} and plain["send_to_peer"] == {"target", "message"}
    opted = offered("opted")
    assert opted["send_to_session"] == {"session_id", "message", "wait_seconds", "mode"}
    assert opted["send_to_peer"] == {"target", "message", "wait_seconds"}
    assert offered("peered")["send_to_peer"] == {"target", "message", "run_id"}
