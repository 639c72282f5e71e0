"""The web view's pages fit their screen and show what was said (issue 43): at a phone's 390 px, a laptop's
1280 px and a wide 1920 px, no table (and no room transcript) is wider than its box, a long message and its
reply are on the screen (wrapped, never behind a sideways scroll), long ids and addresses are shortened (the
whole in their title and link), and a multi-line message leaves no tall gap in its row. Each page is saved as
a screenshot at 1280 px in tests/artifacts/web/ (ignored by git)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from conftest import GatewayThread, run_cli
from webpage import api, log_in

pytestmark = pytest.mark.browser

WIDTHS = (390, 1280, 1920)
ARTIFACTS = Path(__file__).parent / "artifacts" / "web"
UNBROKEN = "https://builds.example.com/pipelines/" + "x" * 120  # one word wider than a phone
LONG = (
    "ALPHA the person's long message, "
    + "with many words to wrap, " * 12
    + UNBROKEN
    + "\n"
    + "\n".join(f"line {i}: more of the same message" for i in range(2, 30))
)
ONE_LINE_LONG = "BRAVO a long single line from research, " + "spoken at length and then some more, " * 10


def _session(client: httpx.Client, profile: str, title: str) -> str:
    created = client.post(f"/p/{profile}/api/sessions", json={"title": title})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


def _chat(client: httpx.Client, profile: str, sid: str, message: str) -> None:
    answer = client.post(f"/p/{profile}/api/sessions/{sid}/chat", json={"message": message})
    assert answer.status_code == 200, answer.text


def _ended(client: httpx.Client, run_id: str) -> None:
    for _ in range(200):
        if client.get(f"/v1/runs/{run_id}").json()["status"] not in ("queued", "in_progress", "running"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{run_id} did not end")


def _populate(gateway: GatewayThread) -> dict[str, str]:
    """A home with what makes pages wide: long and multi-line messages and replies, session addresses as
    senders and targets, a held message, a room that has talked, and a run still running."""
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    assert run_cli("profile", "allow", "research", "builds", "default").exit_code == 0
    assert run_cli("profile", "hold", "default", "research").exit_code == 0
    made = run_cli("room", "create", "standup", "--member", "default", "--member", "research")
    assert made.exit_code == 0, made.stderr
    with api(gateway) as client:
        started = client.post("/v1/runs", json={"input": LONG})
        assert started.status_code == 202, started.text
        run_id = str(started.json()["run_id"])
        _ended(client, run_id)
        sid = _session(client, "research", "asks")
        _chat(client, "research", sid, f"/send builds {ONE_LINE_LONG}")
        _chat(client, "research", sid, f"/send default {ONE_LINE_LONG}")  # held: default holds research
        said = client.post("/v1/rooms/standup/messages", json={"message": LONG})
        assert said.status_code == 202, said.text
        for _ in range(200):
            lines = client.get("/v1/rooms/standup").json()["lines"]
            if len(lines) >= 3 and all(line["state"] in ("said", "completed") for line in lines):
                break
            time.sleep(0.05)
        slow = client.post("/p/builds/v1/runs", json={"input": "/sleep 60\n" + LONG})
        assert slow.status_code == 202, slow.text
    return {"run": run_id, "session": sid, "running": str(slow.json()["run_id"])}


FITS = """el => {
  const box = el.parentElement, page = document.documentElement;
  return {what: el.tagName + (el.id ? "#" + el.id : ""), own: [el.scrollWidth, el.clientWidth],
          box: [box.scrollWidth, box.clientWidth], page: [page.scrollWidth, page.clientWidth]};
}"""
SHOWN = """el => {
  const r = el.getBoundingClientRect(), right = document.documentElement.clientWidth;
  if (!(r.width > 0 && r.height > 0)) return "no box";
  if (r.left < 0 || r.right > right + 1) return `off-screen: ${Math.round(r.left)}-${Math.round(r.right)} of ${right}`;
  for (let a = el.parentElement; a; a = a.parentElement) {
    if (getComputedStyle(a).overflowX === "visible") continue;
    const b = a.getBoundingClientRect();
    if (r.left < b.left - 1 || r.right > b.right + 1) return `cut off by ${a.tagName}.${a.className}`;
  }
  return "";
}"""


def _fits(tab: Any, selector: str) -> None:
    """Every element `selector` finds, and its box, and the page, no wider than they are shown."""
    found = tab.locator(selector).all()
    assert found, f"nothing is {selector}"
    for el in found:
        m = el.evaluate(FITS)
        width = tab.viewport_size["width"]
        assert m["own"][0] <= m["own"][1], f"{m['what']} at {width} px: {m}"
        assert m["box"][0] <= m["box"][1], f"{m['what']}'s box at {width} px: {m}"
        assert m["page"][0] <= m["page"][1], f"the page at {width} px: {m}"


def _shown(el: Any, what: str, width: int) -> None:
    expect(el).to_be_visible()
    why = el.evaluate(SHOWN)
    assert not why, f"{what} at {width} px: {why}"


def _at_each_width(tab: Any, url: str, name: str, check: Any) -> None:
    try:
        for width in WIDTHS:
            tab.set_viewport_size({"width": width, "height": 900})
            tab.goto(url)
            check(width)
            if width == 1280:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                (ARTIFACTS.parent / ".gitignore").write_text("*\n")  # pictures are never committed
                tab.screenshot(path=str(ARTIFACTS / f"{name}-1280.png"), full_page=True)
    finally:
        tab.goto("about:blank")  # a page that follows the gateway live lets go of it before the gateway stops


def _short_id(el: Any, full: str) -> None:
    """A long id shown shortened, the whole id in its title (hover) and its link."""
    expect(el).to_have_attribute("title", full)
    shown = el.inner_text()
    assert "…" in shown and len(shown) < len(full), shown


def test_the_ledger_shows_each_message_and_reply_wrapped_within_the_screen(page: Any, gateway: GatewayThread) -> None:
    made = _populate(gateway)
    log_in(page, gateway, "/web/ledger")

    def check(width: int) -> None:
        _fits(page, "main table")
        row = page.locator("#ledger tbody tr").filter(has=page.locator(".message .text", has_text=re.compile("^ALPHA")))
        _shown(row.locator(".message .text"), "the long message", width)
        _shown(row.locator(".message .reply"), "its reply", width)
        _shown(row.locator(".message"), "the message's cell", width)
        expect(row.locator(".message")).to_contain_text("ALPHA the person's long message")
        if width >= 1280:  # a row as tall as a few lines, not as its message's thirty
            for tr in page.locator("#ledger tbody tr").all():
                assert tr.bounding_box()["height"] < 260, tr.inner_text()[:200]
        text = row.locator(".message .text")
        folded = text.bounding_box()["height"]
        row.locator(".message summary").click()  # a long message opens to the whole, no script needed
        assert text.bounding_box()["height"] > 5 * folded
        _shown(text, "the opened message", width)
        sent = page.locator("#ledger tbody tr", has_text="BRAVO").filter(has=page.locator(".to", has_text="builds"))
        sender = sent.locator(".from a")
        expect(sender).to_have_attribute("href", f"/web/sessions/{made['session']}")
        _short_id(sender, f"research/{made['session']}")
        expect(sender).to_have_text(re.compile(r"^research/…"))

    _at_each_width(page, gateway.url + "/web/ledger", "ledger", check)


def test_the_runs_tables_show_messages_ids_and_senders_within_the_screen(page: Any, gateway: GatewayThread) -> None:
    made = _populate(gateway)
    log_in(page, gateway, "/web/runs")

    def check(width: int) -> None:
        expect(page.locator(f"#run-{made['running']}")).to_have_attribute("data-state", "running")
        _fits(page, "main table")
        for table in ("#active-runs", "#ended-runs"):
            row = page.locator(f"{table} tbody tr").filter(has=page.locator(".message", has_text="ALPHA")).first
            _shown(row.locator(".message"), f"the long message in {table}", width)
            for cell in row.locator("td").all():
                _shown(cell, f"a cell of {table}", width)
        ended = page.locator(f"#ended-runs #run-{made['run']}")
        link = ended.locator(".id a")
        expect(link).to_have_attribute("href", f"/web/runs/{made['run']}")
        _short_id(link, made["run"])
        expect(link).to_have_text(made["run"][:8] + "…")
        sent = page.locator("#ended-runs tbody tr").filter(has=page.locator(".from", has_text="research/"))
        _shown(sent.locator(".from"), "the sender", width)
        _short_id(sent.locator(".from [title]"), f"research/{made['session']}")
        if width >= 1280:
            for tr in page.locator("#ended-runs tbody tr, #active-runs tbody tr").all():
                assert tr.bounding_box()["height"] < 260, tr.inner_text()[:200]

    # last: the page's live stream is cut when the test ends, not mid-test
    _at_each_width(page, gateway.url + "/web/runs", "runs", check)


def test_a_room_shows_each_speaker_in_a_bubble_the_person_on_one_side(page: Any, gateway: GatewayThread) -> None:
    _populate(gateway)
    log_in(page, gateway, "/web/rooms/standup")

    def check(width: int) -> None:
        lines = page.locator("#room-lines .room-line")
        expect(lines).to_have_count(3)
        _fits(page, "#room-lines")
        mine, theirs = lines.nth(0), lines.nth(1)
        expect(mine).to_have_class(re.compile(r"\bmsg\b.*\bperson\b|\bperson\b.*\bmsg\b"))
        expect(theirs).to_have_class(re.compile(r"\bmsg\b"))
        expect(lines.nth(2)).to_have_class(re.compile(r"\bmsg\b"))
        for line in lines.all():
            _shown(line, "a line of the room", width)
            _shown(line.locator(".text"), "what was said", width)
        box = page.locator("#room-lines").bounding_box()
        me, member = mine.bounding_box(), theirs.bounding_box()
        assert member["x"] - box["x"] < 2  # a member speaks from the left
        if width > 600:  # the person from the right; on a phone each line takes the whole width
            assert box["x"] + box["width"] - (me["x"] + me["width"]) < 2
            assert me["x"] > member["x"] + 20, (me, member)
        person_bg = mine.evaluate("e => getComputedStyle(e).backgroundColor")
        assert person_bg != theirs.evaluate("e => getComputedStyle(e).backgroundColor")

    _at_each_width(page, gateway.url + "/web/rooms/standup", "room", check)


def test_the_held_page_fits_the_screen(page: Any, gateway: GatewayThread) -> None:
    made = _populate(gateway)
    log_in(page, gateway, "/web/held")

    def check(width: int) -> None:
        item = page.locator(".held-item")
        expect(item).to_have_count(1)
        _fits(page, "#held")
        _shown(item.locator(".held-message"), "the held message", width)
        sender = item.locator(".sender")
        _shown(sender, "its sender", width)
        _short_id(sender.locator("[title]"), f"research/{made['session']}")
        for button in ("Approve", "Deny"):
            _shown(item.get_by_role("button", name=button), button, width)

    _at_each_width(page, gateway.url + "/web/held", "held", check)


def test_the_overview_says_what_waits_for_the_person(page: Any, gateway: GatewayThread) -> None:
    _populate(gateway)
    log_in(page, gateway, "/")

    def check(width: int) -> None:
        _fits(page, "main table")
        held = page.locator("#held-count")
        expect(held).to_have_text("1")
        expect(page.locator("a#waiting-held")).to_have_attribute("href", "/web/held")
        _shown(held, "the count of held messages", width)
        expect(page.locator("#room-count")).to_have_text("1")
        room = page.locator("#overview-rooms a", has_text="standup")
        expect(room).to_have_attribute("href", "/web/rooms/standup")
        _shown(room, "the room", width)

    _at_each_width(page, gateway.url + "/", "overview", check)
