"""The agent card over HTTP caching (A2A v1.0 §8.6.1): a `Cache-Control` with a `max-age` and an `ETag` of the
card's content on every path it is served at, `304 Not Modified` (no body) for a client that names the card it
has in `If-None-Match` (or, naming none, has it since its `Last-Modified`), and a new ETag and time once the card
changes."""

from __future__ import annotations

import os
import time
from email.utils import formatdate, parsedate_to_datetime

import httpx

from conftest import GatewayProcess

PATHS = (
    "/.well-known/agent-card.json",
    "/p/default/.well-known/agent-card.json",
    "/.well-known/agent.json",
    "/p/default/.well-known/agent.json",
)


def _get(gateway: GatewayProcess, path: str, **headers: str) -> httpx.Response:
    return httpx.get(f"{gateway.url}{path}", headers=headers, trust_env=False)


def test_every_card_path_says_how_long_to_keep_the_card_and_gives_its_etag(gateway: GatewayProcess) -> None:
    for path in PATHS:
        r = _get(gateway, path)
        assert r.status_code == 200, (path, r.text)
        assert "max-age=" in r.headers.get("cache-control", ""), (path, r.headers)
        assert r.headers.get("etag", "").startswith('"'), (path, r.headers)
        # the v1.0 path gives 0.3's shape to a client that asks for 0.3: a cache keeps the two apart
        assert "a2a-version" in r.headers.get("vary", "").lower(), (path, r.headers)


def test_a_client_that_has_the_card_is_told_it_is_not_modified(gateway: GatewayProcess) -> None:
    for path in PATHS:
        first = _get(gateway, path)
        etag = first.headers["etag"]
        again = _get(gateway, path, **{"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b"", (path, again.status_code, again.text)
        assert again.headers["etag"] == etag and "max-age=" in again.headers["cache-control"], again.headers
        assert _get(gateway, path, **{"If-None-Match": f'"other", W/{etag}'}).status_code == 304  # weak comparison
        other = _get(gateway, path, **{"If-None-Match": '"not-this-card"'})
        assert other.status_code == 200 and other.json() == first.json(), (path, other.status_code)


def test_the_etag_changes_with_the_card_and_with_its_shape(gateway: GatewayProcess) -> None:
    path = "/.well-known/agent-card.json"
    before = _get(gateway, path)
    legacy = _get(gateway, path, **{"A2A-Version": "0.3"})
    assert legacy.json()["protocolVersion"] == "0.3" and legacy.headers["etag"] != before.headers["etag"]
    (gateway.root / "profiles" / "default" / "SOUL.md").write_text("You answer in haiku.\n")
    after = _get(gateway, path, **{"If-None-Match": before.headers["etag"]})
    assert after.status_code == 200 and after.json()["description"] == "You answer in haiku.", after.text
    assert after.headers["etag"] != before.headers["etag"]


def test_the_card_says_when_it_last_changed_and_a_client_that_has_it_since_is_told_it_is_not_modified(
    gateway: GatewayProcess,
) -> None:
    """`Last-Modified` is the latest of the gateway's start, SOUL.md's time and the skills': a client that asks
    `If-Modified-Since` that time (and names no ETag) gets a 304; once SOUL.md or a skill changes, the card
    with its new time."""
    first = _get(gateway, PATHS[0])
    modified = parsedate_to_datetime(first.headers["last-modified"]).timestamp()
    assert modified <= time.time()
    for path in PATHS:
        r = _get(gateway, path, **{"If-Modified-Since": first.headers["last-modified"]})
        assert r.status_code == 304 and r.content == b"", (path, r.status_code, r.headers)
        assert r.headers["last-modified"] == first.headers["last-modified"], r.headers
        earlier = _get(gateway, path, **{"If-Modified-Since": formatdate(modified - 3600, usegmt=True)})
        assert earlier.status_code == 200 and earlier.json() == _get(gateway, path).json(), path
        # an ETag that is not the card's decides: If-Modified-Since is not looked at then (RFC 9110 §13.2.2)
        other = _get(gateway, path, **{"If-None-Match": '"other"', "If-Modified-Since": first.headers["last-modified"]})
        assert other.status_code == 200, path
    profile = gateway.root / "profiles" / "default"
    soul = profile / "SOUL.md"
    soul.write_text("You answer in limericks.\n")
    os.utime(soul, (modified + 60, modified + 60))
    changed = _get(gateway, PATHS[0], **{"If-Modified-Since": first.headers["last-modified"]})
    assert changed.status_code == 200 and changed.json()["description"] == "You answer in limericks.", changed.text
    assert changed.headers["last-modified"] == formatdate(modified + 60, usegmt=True), changed.headers
    skill = profile / "skills" / "haiku" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: haiku\ndescription: writes haiku\n---\n")
    for made in (skill, skill.parent, skill.parent.parent):
        os.utime(made, (modified + 120, modified + 120))
    added = _get(gateway, PATHS[0], **{"If-Modified-Since": changed.headers["last-modified"]})
    assert added.status_code == 200 and [s["id"] for s in added.json()["skills"]] == ["haiku"], added.text
    assert added.headers["last-modified"] == formatdate(modified + 120, usegmt=True), added.headers
