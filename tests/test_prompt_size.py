"""Backchannel's own part of every model call (its note in the system prompt, the tool schemas) stays small.

A small local model pays for each token before the person's first word (issue 13): the persona, memories
and skills are the profile's own and kept whole; what Backchannel adds is pinned here by characters, and
by the real server's token count in tests/interop/test_llama_interop.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from scripted_model import ScriptedModel

# 3,304 before issue 13 shortened the note and the tool descriptions, 2,392 after; 2,561 once every argument
# of every tool was described (issue 21: hosts show them), mostly the JSON keys: 802 → 848 tokens on llama.cpp.
# 2,958 with the teams (issue 25): `group:NAME` in send_to_session's address (+14), the notify_when_idle tool
# (+280 of schema: the price of a tool) and send_to_session's `mode` (queue or steer, +103).
OWN_CHARS_BOUND = 3000
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
