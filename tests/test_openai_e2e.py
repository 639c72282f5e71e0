"""The openai engine end to end: `backchannel chat` against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import free_port, run_cli
from scripted_model import ScriptedModel


def make_openai_profile(root: Path, base_url: str, *, max_turns: int = 20) -> None:
    result = run_cli(
        "profile",
        "create",
        "coder",
        "--engine",
        "openai",
        "--base-url",
        base_url,
        "--model",
        "m-test",
        "--api-key-env",
        "CODER_KEY",
    )
    assert result.exit_code == 0, result.stderr
    profile = root / "profiles/coder"
    (profile / "SOUL.md").write_text("You are Coder, terse and exact.\n")
    (profile / "memories/USER.md").write_text("The person prefers Python.\n")
    (profile / "skills/bisect").mkdir(parents=True)
    (profile / "skills/bisect/SKILL.md").write_text("---\nname: bisect\ndescription: find a bad commit\n---\n")
    cfg = (profile / "config.yaml").read_text().replace("max_turns: 20", f"max_turns: {max_turns}")
    (profile / "config.yaml").write_text(cfg)
    with (root / ".env").open("a") as fh:
        fh.write("CODER_KEY=sk-test-123\n")


def test_tool_loop_with_memory_and_full_context(initialised: Path) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "memory", "arguments": {"action": "add", "target": "memory", "content": "project uses uv"}}
            ]
        },
        "Noted: the project uses uv.",
    ]
    with ScriptedModel(script) as model:
        make_openai_profile(initialised, model.base_url)
        result = run_cli("chat", "-p", "coder", "-q", "remember we use uv", "--json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["reply"] == "Noted: the project uses uv."
        first, second = model.requests
        system = first["messages"][0]
        assert system["role"] == "system"
        for part in ("You are Coder", "The person prefers Python", "bisect: find a bad commit"):
            assert part in system["content"]
        assert first["model"] == "m-test"
        assert {t["function"]["name"] for t in first["tools"]} >= {"memory"}
        for tool in first["tools"]:  # every argument of every tool says what it takes
            schema = tool["function"]["parameters"]
            assert all(prop.get("description") for prop in schema["properties"].values()), tool
        assert model.headers[0]["Authorization"] == "Bearer sk-test-123"
        tool_result = second["messages"][-1]
        assert tool_result["role"] == "tool" and json.loads(tool_result["content"])["ok"] is True
        assert json.loads(tool_result["content"])["result"] == "delivered"
    assert "project uses uv" in (initialised / "profiles/coder/memories/MEMORY.md").read_text()
    sid = json.loads(result.stdout)["session_id"]
    roles = [m["role"] for m in json.loads(run_cli("sessions", "show", sid, "--json").stdout)["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_history_is_sent_on_resume(initialised: Path) -> None:
    with ScriptedModel(["first answer", "second answer"]) as model:
        make_openai_profile(initialised, model.base_url)
        sid = json.loads(run_cli("chat", "-p", "coder", "-q", "one", "--json").stdout)["session_id"]
        assert run_cli("chat", "--resume", sid, "-q", "two").stdout.strip() == "second answer"
        sent = [(m["role"], m["content"]) for m in model.requests[1]["messages"][1:]]
        assert sent == [("user", "one"), ("assistant", "first answer"), ("user", "two")]


def test_tool_errors_go_back_to_the_model_and_every_result_says_its_outcome(initialised: Path) -> None:
    script = [
        {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
        {"tool_calls": [{"name": "memory", "arguments": {"action": "explode", "target": "memory", "content": "x"}}]},
        {"tool_calls": [{"name": "check_message", "arguments": {"run_id": "run_0123456789abcdef0123456789abcdef"}}]},
        {"tool_calls": [{"name": "send_to_session", "arguments": {"session_id": "20200101_000000_abcdef"}}]},
        {"tool_calls": [{"name": "list_sessions", "arguments": {}}]},
        "I could not do that.",
    ]
    with ScriptedModel(script) as model:
        make_openai_profile(initialised, model.base_url)
        result = run_cli("chat", "-p", "coder", "-q", "try tools")
        assert result.exit_code == 0, result.stderr
        results = [json.loads(r["messages"][-1]["content"]) for r in model.requests[1:]]
        seen = [(r["result"], r.get("error", {}).get("code")) for r in results]
        assert seen == [
            ("refused", "unknown_tool"),
            ("refused", "invalid_arguments"),
            ("refused", "not_found"),
            ("refused", "invalid_arguments"),
            ("delivered", None),
        ], results


def test_max_turns_bounds_model_calls(initialised: Path) -> None:
    looping = {
        "tool_calls": [{"name": "memory", "arguments": {"action": "remove", "target": "memory", "content": "nothing"}}]
    }
    with ScriptedModel(lambda body: looping) as model:
        make_openai_profile(initialised, model.base_url, max_turns=3)
        result = run_cli("chat", "-p", "coder", "-q", "loop forever", "--json")
        assert result.exit_code == 0, result.stderr
        assert len(model.requests) == 3
        assert "max_turns" in json.loads(result.stdout)["reply"]


def test_endpoint_down_names_profile_and_url_and_keeps_the_session(initialised: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    make_openai_profile(initialised, url)
    result = run_cli("chat", "-p", "coder", "-q", "anyone there?")
    assert result.exit_code == 1
    assert "coder" in result.stderr and url in result.stderr
    assert "Traceback" not in result.stderr
    sessions = json.loads(run_cli("sessions", "list", "--json").stdout)
    assert sessions[0]["message_count"] == 0


def test_malformed_endpoint_reply_is_a_clear_error(initialised: Path) -> None:
    with ScriptedModel([{"raw": "<html>proxy error</html>"}]) as model:
        make_openai_profile(initialised, model.base_url)
        result = run_cli("chat", "-p", "coder", "-q", "hi")
        assert result.exit_code == 1
        assert "malformed" in result.stderr and "coder" in result.stderr


def test_json_reply_shape_is_handled_too(initialised: Path) -> None:
    with ScriptedModel(
        [
            {
                "tool_calls": [
                    {"name": "memory", "arguments": {"action": "add", "target": "user", "content": "likes tea"}}
                ]
            },
            "ok",
        ],
        stream=False,
    ) as model:
        make_openai_profile(initialised, model.base_url)
        assert run_cli("chat", "-p", "coder", "-q", "I like tea").stdout.strip() == "ok"
    assert "likes tea" in (initialised / "profiles/coder/memories/USER.md").read_text()
