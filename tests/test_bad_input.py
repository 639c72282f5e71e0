"""Bad input gets a 400 in the error envelope (never a 500) and changes nothing: JSON too deep, numbers too long,
lone surrogates, and names or ids with a trailing newline (DESIGN 5 "Bad input", issue 15 item 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from conftest import GatewayProcess, GatewayThread, run_cli


def envelope(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error: dict[str, Any] = r.json()["error"]
    assert error["code"] == code and error["message"] and error["type"], error
    return error


def raw_post(gw: GatewayProcess, path: str, body: str) -> httpx.Response:
    return httpx.post(
        gw.url + path, content=body.encode("utf-8"), headers=gw.headers(**{"Content-Type": "application/json"})
    )


def session_count(gw: GatewayProcess) -> int:
    r = httpx.get(gw.url + "/api/sessions?limit=200", headers=gw.headers())
    assert r.status_code == 200, r.text
    return len(r.json()["data"])


def test_deep_json_and_huge_numbers_are_400_in_the_envelope_and_nothing_is_made(gateway: GatewayThread) -> None:
    before = session_count(gateway)
    deep = '{"title": "x", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "nests" in envelope(raw_post(gateway, "/api/sessions", deep), 400, "invalid_json")["message"]
    medium = '{"title": "x", "meta": ' + "[" * 40 + "]" * 40 + "}"  # under the recursion limit, over ours
    envelope(raw_post(gateway, "/api/sessions", medium), 400, "invalid_json")
    huge = '{"title": "x", "n": ' + "7" * 5000 + "}"
    assert "number" in envelope(raw_post(gateway, "/api/sessions", huge), 400, "invalid_json")["message"]
    envelope(raw_post(gateway, "/api/sessions", '{"title": "x", "n": 1e' + "9" * 5000 + "}"), 400, "invalid_json")
    envelope(raw_post(gateway, "/api/sessions", '{"title": NaN}'), 400, "invalid_json")
    run = raw_post(gateway, "/v1/runs", '{"input": "hi", "x": ' + "{" * 200_000 + "}" * 200_000 + "}")
    envelope(run, 400, "invalid_json")
    assert session_count(gateway) == before
    ok = raw_post(gateway, "/api/sessions", '{"title": "fine", "meta": [[1, 2.5, -3]]}')
    assert ok.status_code == 201, ok.text


def test_lone_surrogates_in_title_source_session_id_or_message_are_400(gateway: GatewayThread) -> None:
    before = session_count(gateway)
    for body in (
        '{"title": "a\\ud800b"}',
        '{"source": "\\udfff"}',
        '{"id": "abc\\ud83d"}',
        '{"title": "ok", "\\ud800": 1}',
    ):
        error = envelope(raw_post(gateway, "/api/sessions", body), 400, "invalid_payload")
        assert "surrogate" in error["message"], error
    sid = raw_post(gateway, "/api/sessions", '{"title": "t"}').json()["session"]["id"]
    chat = raw_post(gateway, f"/api/sessions/{sid}/chat", '{"message": "hi \\ud800"}')
    envelope(chat, 400, "invalid_payload")
    run = raw_post(gateway, "/v1/runs", '{"input": "x", "session_id": "s\\udc00"}')
    envelope(run, 400, "invalid_payload")
    assert session_count(gateway) == before + 1
    messages = httpx.get(f"{gateway.url}/api/sessions/{sid}/messages", headers=gateway.headers()).json()["data"]
    assert messages == []


def test_a_trailing_newline_fails_every_name_and_id_check(initialised: Path, gateway: GatewayThread) -> None:
    made = run_cli("profile", "create", "evil\n")
    assert made.exit_code == 2, made
    assert "invalid profile name" in made.stderr and "Traceback" not in made.stderr
    assert sorted(p.name for p in (initialised / "profiles").iterdir()) == ["default"]
    assert run_cli("peer", "add", "spark\n", "--url", "http://127.0.0.1:9", "--key", "k" * 20).exit_code == 2
    assert "spark" not in run_cli("peer", "list").stdout
    envelope(raw_post(gateway, "/api/sessions", '{"id": "abc\\n"}'), 400, "invalid_session_id")
    assert run_cli("send", "default/x_y\n", "hi").exit_code == 2
