"""The web view in a real browser (Debian's chromium through Playwright): log in, read a session, send a
message and watch its reply stream in, watch runs move live and stop one, filter the ledger to a pair.
Every test fails on a console error or warning; a failing test leaves a screenshot (its path is printed)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from backchannel.home import config
from conftest import GatewayThread, run_cli
from webpage import api, log_in

pytestmark = pytest.mark.browser


def _session(client: httpx.Client, profile: str, title: str) -> str:
    created = client.post(f"/p/{profile}/api/sessions", json={"title": title})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


def _chat(client: httpx.Client, profile: str, session_id: str, message: str, **headers: str) -> dict[str, Any]:
    answer = client.post(f"/p/{profile}/api/sessions/{session_id}/chat", json={"message": message}, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _start(client: httpx.Client, message: str) -> str:
    started = client.post("/v1/runs", json={"input": message})
    assert started.status_code == 202, started.text
    return str(started.json()["run_id"])


def _mark(tab: Any) -> None:
    """Mark the document: a page that reloads loses the mark."""
    tab.evaluate("window.__still_this_page = true")


def _same_page(tab: Any) -> bool:
    return bool(tab.evaluate("window.__still_this_page === true"))


def test_log_in_and_see_a_session_with_another_agents_message_and_a_folded_tool_call(
    page: Any, gateway: GatewayThread
) -> None:
    with api(gateway) as client:
        sid = _session(client, "default", "Bot Chat")  # the one session a peer's key reaches
        _chat(client, "default", sid, "hello from the person")
        scout = json.loads(run_cli("key", "create", "scout", "--read", "--json").stdout)["key"]
        framed = _chat(client, "default", sid, "a word from scout", Authorization=f"Bearer {scout}")
        _chat(client, "default", sid, "/send nowhere ping")  # the echo engine calls send_to_session

    page.goto(gateway.url + "/")
    expect(page).to_have_url(re.compile(r"/web/login\?next=%2F$"))  # no page without logging in
    log_in(page, gateway)
    expect(page.locator("#agents")).to_be_visible()
    expect(page.locator("#queue-depth")).to_have_text("0")
    page.get_by_role("link", name="Bot Chat").click()

    expect(page.locator("h1")).to_have_text("default · Bot Chat")
    messages = page.locator("#messages article")
    expect(messages.first).to_contain_text("hello from the person")
    agent = page.locator("article.agent")
    expect(agent).to_have_count(1)
    expect(agent).to_contain_text("from another agent")
    expect(agent).to_contain_text("peer scout")
    expect(agent).to_contain_text("via the peer API")
    expect(agent.locator("a.run-link")).to_have_text(framed["run_id"] if "run_id" in framed else re.compile("run_"))
    tool = page.locator("details.tool").first
    expect(tool.locator("summary")).to_contain_text("send_to_session")
    expect(tool.locator("pre").first).to_be_hidden()  # folded until opened
    tool.locator("summary").click()
    expect(tool.locator("pre").first).to_contain_text('"session_id": "nowhere"')


def test_send_a_message_and_watch_the_reply_stream_in(page: Any, gateway: GatewayThread) -> None:
    with api(gateway) as client:
        sid = _session(client, "default", "live")
    log_in(page, gateway, f"/web/sessions/{sid}")
    _mark(page)
    page.fill("#message", "/sleep 1\nstreamed words")
    page.keyboard.press("Tab")  # the send button is reached by keyboard
    page.keyboard.press("Enter")

    live = page.locator("article.assistant.live")
    expect(live.locator(".state")).to_have_text(re.compile("queued|running"))
    expect(live.locator(".reply")).to_have_text("", timeout=500)  # the turn takes a second: nothing yet
    expect(live.locator(".reply")).to_have_text("default (echo): streamed words")
    expect(live.locator(".state")).to_have_text("completed")
    expect(page.locator("#message")).to_have_value("")  # a fresh box for the next message
    assert _same_page(page)
    with api(gateway) as client:
        history = client.get(f"/api/sessions/{sid}/messages").json()["data"]
    assert [m["content"] for m in history] == ["/sleep 1\nstreamed words", "default (echo): streamed words"]


def test_watch_a_run_go_queued_running_completed_live_and_stop_another(page: Any, gateway: GatewayThread) -> None:
    log_in(page, gateway, "/web/runs")
    _mark(page)
    with api(gateway) as client:
        first = _start(client, "/sleep 1.5\nfirst")
        second = _start(client, "/sleep 1\nsecond")  # the same Bot Chat: it waits behind the first
    row = page.locator(f"#run-{second}")
    expect(row).to_have_attribute("data-state", "queued")
    expect(row).to_contain_text("#1 in its queue")
    expect(page.locator(f"#run-{first}")).to_have_attribute("data-state", "running")
    expect(row).to_have_attribute("data-state", "running", timeout=5000)
    expect(row).to_have_attribute("data-state", "completed", timeout=5000)
    expect(page.locator(f"#ended-runs #run-{first}")).to_have_attribute("data-state", "completed")

    with api(gateway) as client:
        slow = _start(client, "/sleep 60\nnever finished")
    expect(page.locator(f"#run-{slow}")).to_have_attribute("data-state", "running")
    page.get_by_role("button", name=f"Stop {slow}").click()
    expect(page.locator(f"#ended-runs #run-{slow}")).to_have_attribute("data-state", "cancelled")
    assert _same_page(page)
    with api(gateway) as client:
        assert client.get(f"/v1/runs/{slow}").json()["status"] == "cancelled"


def test_filter_the_ledger_to_a_pair_and_open_its_exchange(page: Any, gateway: GatewayThread) -> None:
    for name in ("research", "builds", "assistant", "vault"):
        assert run_cli("profile", "create", name).exit_code == 0
    path = config.profiles_dir(gateway.root) / "research" / "config.yaml"
    settings = config.load_yaml(path)
    settings.setdefault("agent", {})["session_messaging"] = {"allow": ["builds", "assistant"]}
    config.write_yaml(path, settings)
    with api(gateway) as client:
        sid = _session(client, "research", "asks")
        _chat(client, "research", sid, "/send builds is the build green?")
        _chat(client, "research", sid, "/send assistant book the room")
        _chat(client, "research", sid, "/send vault open up")  # refused: vault is not in research's allow

    log_in(page, gateway, "/web/ledger")
    expect(page.locator("#ledger tbody tr")).to_have_count(6)  # 3 from the person to research, 2 agent sends, 1 refusal
    refusal = page.locator("#ledger tr.outcome-refused")
    expect(refusal).to_contain_text("not_allowed")  # a refusal shows its code and its reason
    expect(refusal.locator(".reason")).to_contain_text("vault")
    page.fill("#address-a", "research")
    page.fill("#address-b", "builds")
    page.get_by_role("button", name="Filter").click()

    rows = page.locator("#ledger tbody tr")
    expect(rows).to_have_count(1)
    sender = rows.locator(".from a")  # shown shortened (research/…): the whole address is its title and link
    expect(sender).to_have_attribute("title", f"research/{sid}")
    expect(sender).to_have_attribute("href", f"/web/sessions/{sid}")
    expect(rows.locator(".to")).to_contain_text("builds/")
    expect(rows).not_to_contain_text("assistant")
    expect(rows.locator(".outcome")).to_have_text("delivered")
    expect(page.locator("#address-a")).to_have_value("research")  # the filter stays in the form

    rows.get_by_role("link", name="exchange").click()
    hops = page.locator("#exchange li")
    expect(hops).to_have_count(2)  # the person's message, then research's to builds
    expect(hops.nth(0)).to_contain_text("hop 0")
    expect(hops.nth(0)).to_contain_text("human:api")
    expect(hops.nth(1)).to_contain_text("hop 1")
    expect(hops.nth(1)).to_have_class(re.compile("in-pair"))
    hops.nth(1).locator("a", has_text="builds/").click()
    expect(page.locator("h1")).to_contain_text("builds · Bot Chat")
    expect(page.locator("article.agent")).to_contain_text(f"session research/{sid}")


def test_approve_and_deny_held_messages_and_the_sender_learns_each_outcome(page: Any, gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    for name, rules in (("research", {"allow": ["default"]}), ("default", {"hold": ["research"]})):
        path = config.profiles_dir(gateway.root) / name / "config.yaml"
        settings = config.load_yaml(path)
        settings.setdefault("agent", {})["session_messaging"] = rules
        config.write_yaml(path, settings)
    with api(gateway) as client:
        sid = _session(client, "research", "asks")
        for text in ("first please", "second please"):
            sent = _chat(client, "research", sid, f"/send default {text}")
            assert '"result": "held"' in sent["message"]["content"], sent  # held for the person, not refused

    log_in(page, gateway, "/web/held")
    items = page.locator(".held-item")
    expect(items).to_have_count(2)
    first, second = items.filter(has_text="first please"), items.filter(has_text="second please")
    expect(first.locator(".sender a")).to_have_attribute("title", f"research/{sid}")  # shown as research/…
    first.get_by_role("button", name="Approve").click()
    expect(page.locator("h1")).to_contain_text("run_")  # the approved run's page
    page.goto(gateway.url + "/web/held")
    expect(items).to_have_count(1)
    second.get_by_label("Reason").fill("not during the freeze")
    second.get_by_role("button", name="Deny").click()
    expect(page.locator("#held-empty")).to_be_visible()

    with api(gateway) as client:  # each outcome wakes the sender's session, like a late reply
        for _ in range(100):
            told = " ".join(
                m["content"] or "" for m in client.get(f"/p/research/api/sessions/{sid}/messages").json()["data"]
            )
            if "default (echo): first please" in told and "not during the freeze" in told:
                break
            time.sleep(0.1)
        states = sorted(
            r["state"] for r in client.get("/v1/ledger").json()["data"] if r["sender"].startswith("research/")
        )
    assert "default (echo): first please" in told, told
    assert "not during the freeze" in told, told
    assert states == ["completed", "denied"], states


def test_answer_an_agents_question_in_the_browser_and_its_run_goes_on_with_the_answer(
    page: Any, gateway: GatewayThread
) -> None:
    with api(gateway) as client:
        asked = _start(client, "/ask which colour for the logo? | blue, green | green")
        plain = _start(client, "/ask what should the release be called?")
        for _ in range(100):
            if len(client.get("/v1/questions").json()["data"]) == 2:
                break
            time.sleep(0.1)

    log_in(page, gateway)
    expect(page.locator("#question-count")).to_have_text("2")
    page.locator("#waiting-questions").click()
    items = page.locator("#questions .held-item")
    expect(items).to_have_count(2)
    colour = items.filter(has_text="which colour for the logo?")
    expect(colour).to_contain_text("Choices: blue, green")
    colour.get_by_label("Answer").select_option("blue")
    colour.get_by_role("button", name="Answer").click()
    expect(page.locator("h1")).to_contain_text(asked[:8])  # the resumed run's page
    page.goto(gateway.url + "/web/questions")
    expect(items).to_have_count(1)
    items.get_by_role("button", name="Decline").click()
    expect(page.locator("#questions-empty")).to_be_visible()
    expect(page.locator("#questions-closed")).to_contain_text("answered: blue")

    with api(gateway) as client:  # each run went on: the answer, and the decline, were its next message
        for _ in range(100):
            runs = {r: client.get(f"/v1/runs/{r}").json() for r in (asked, plain)}
            if all(run["status"] == "completed" for run in runs.values()):
                break
            time.sleep(0.1)
    assert runs[asked]["output"] == "default (echo): blue", runs[asked]
    assert runs[plain]["status"] == "completed", runs[plain]


AS_COLOUR = """value => {
  const probe = document.createElement("div");
  probe.style.color = value;
  document.body.append(probe);
  const colour = getComputedStyle(probe).color;
  probe.remove();
  return colour;
}"""
ONE_LINE = """cell => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
  return lines.size;
}"""


def test_ids_addresses_states_and_outcomes_stay_on_one_line_and_the_page_uses_the_width(
    page: Any, gateway: GatewayThread
) -> None:
    with api(gateway) as client:
        sid = _session(client, "default", "a session with a long message")
        long = "a message with many words in it, " * 8
        for text in (long, "/fail on purpose " + long):
            client.post(f"/api/sessions/{sid}/chat", json={"message": text})
        done = _start(client, "quick one")
        for _ in range(100):
            if client.get(f"/v1/runs/{done}").json()["status"] == "completed":
                break
            time.sleep(0.05)
    page.set_viewport_size({"width": 1600, "height": 900})
    log_in(page, gateway, "/web/ledger")
    cells = page.locator("#ledger td.outcome-cell .badge, #ledger td.to, #ledger td.from, #ledger td.when").all()
    assert len(cells) >= 12
    for cell in cells:
        assert cell.evaluate(ONE_LINE) == 1, cell.inner_text()
    expect(page.locator("#ledger thead")).to_contain_text("outcome")
    page.goto(gateway.url + "/web/runs")  # last: its live stream is cut when the test ends, not mid-test
    expect(page.locator(f"#ended-runs #run-{done}")).to_be_visible()
    for cell in page.locator("#ended-runs td.id, #ended-runs td.state, #ended-runs td.session").all():
        assert cell.evaluate(ONE_LINE) == 1, cell.inner_text()  # "completed", a run id: never broken mid-word
    width = page.evaluate("document.querySelector('main').getBoundingClientRect().width")
    assert width > 1500, width  # no empty margins beside a table that wraps


def test_deny_does_not_look_like_approve(page: Any, gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    assert run_cli("profile", "allow", "research", "default").exit_code == 0
    assert run_cli("profile", "hold", "default", "research").exit_code == 0
    with api(gateway) as client:
        _chat(client, "research", _session(client, "research", "asks"), "/send default may I?")
    log_in(page, gateway, "/web/held")
    approve = page.get_by_role("button", name="Approve")
    deny = page.get_by_role("button", name="Deny")
    look = "b => [getComputedStyle(b).backgroundColor, getComputedStyle(b).color, getComputedStyle(b).borderColor]"
    bad = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--bad').trim()")
    assert approve.evaluate(look) != deny.evaluate(look)
    shown = page.evaluate(AS_COLOUR, bad)
    assert deny.evaluate("b => getComputedStyle(b).color") == shown  # the destructive colour


def test_say_something_in_a_room_and_watch_each_member_answer_in_turn(page: Any, gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    made = run_cli("room", "create", "standup", "--member", "default", "--member", "research")
    assert made.exit_code == 0, made.stderr
    log_in(page, gateway, "/web/rooms")
    page.get_by_role("link", name="standup").click()
    expect(page.locator("h1")).to_have_text("Room standup")
    expect(page.locator("#room-empty")).to_be_visible()
    page.fill("#message", "/sleep 3\nwhat is left?")  # long enough to be seen answering on a loaded machine
    page.get_by_role("button", name="Say").click()

    lines = page.locator("#room-lines li.room-line")
    expect(lines.first).to_contain_text("what is left?")
    expect(lines.nth(1).locator(".speaker")).to_have_text("default")
    expect(lines.nth(1)).to_contain_text("answering…")  # the first member's turn takes seconds
    expect(lines.nth(1).locator(".text")).to_have_text("default (echo): what is left?", timeout=10_000)
    expect(lines.nth(2).locator(".speaker")).to_have_text("research")
    expect(lines.nth(2).locator(".text")).to_contain_text("research (echo): what is left?", timeout=10_000)
    _mark(page)
    expect(lines).to_have_count(3)
    assert _same_page(page)  # the answers came into the page as it stood


def test_an_exchange_is_drawn_as_a_timeline_a_bar_per_run(page: Any, gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    path = gateway.root / "profiles" / "default" / "config.yaml"
    data = config.load_yaml(path)
    data["agent"]["session_messaging"]["allow"] = ["builds"]
    config.write_yaml(path, data)
    with api(gateway) as client:
        sid = _session(client, "default", "Bot Chat")
        asked = _chat(client, "default", sid, "/send builds is the build green?")
    log_in(page, gateway, f"/web/exchanges/{asked['run_id']}")
    timeline = page.locator("#timeline")
    expect(timeline).to_be_visible()
    lanes = [re.compile("^you$"), re.compile("^default · "), re.compile("^builds · ")]
    expect(timeline.locator(".lane-label")).to_have_text(lanes)
    bars = timeline.locator("a.bar")
    expect(bars).to_have_count(2)  # the person's message to default, default's to builds
    expect(bars.nth(1)).to_have_class(re.compile("outcome-delivered"))
    expect(timeline.locator("line.arrow-send")).to_have_count(2)
    expect(timeline.locator("line.arrow-reply")).to_have_count(2)
    tip = bars.nth(1).locator("text.tip")
    expect(tip).to_be_hidden()
    page.keyboard.press("Tab")
    while not bars.nth(1).evaluate("b => b === document.activeElement"):
        page.keyboard.press("Tab")  # by keyboard, bar after bar
    expect(tip).to_be_visible()  # focus shows its message and reply
    expect(tip).to_contain_text("is the build green?")
    expect(bars.nth(1)).to_have_attribute("href", re.compile("^/web/runs/run_"))
