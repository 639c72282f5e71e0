"""The web view's gate, over plain HTTP against a real gateway: nothing is served without the session
cookie (but the login page and its stylesheet), a forged cross-site form changes nothing, the key never
appears in a page, a cookie or the log, a peer's key does not log in, and logging out closes the door."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

import httpx
import pytest

from conftest import GatewayThread, api_key, run_cli

PAGES = [
    "/",
    "/web/runs",
    "/web/runs/live",
    "/web/ledger",
    "/web/sessions/20261130_015530_55cf9b",
    "/web/runs/run_nope",
    "/web/exchanges/run_nope",
    "/web/peers/spark",
    "/web/rooms",
    "/web/rooms/standup",
    "/web/rooms/standup/lines",
    "/web/static/vendor/htmx-2.0.11.min.js",
    "/web/static/vendor/htmx-ext-sse-2.2.4.js",
]


def _browser(gateway: GatewayThread) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, timeout=30, follow_redirects=False)


@contextlib.contextmanager
def _logged_in(gateway: GatewayThread) -> Iterator[httpx.Client]:
    with _browser(gateway) as client:
        answer = client.post("/web/login", data={"key": api_key(gateway.root)}, headers=_same_origin(gateway))
        assert answer.status_code == 303, answer.text
        yield client


def _same_origin(gateway: GatewayThread) -> dict[str, str]:
    return {"Origin": gateway.url}


def _csrf(client: httpx.Client, path: str = "/") -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get(path).text)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("with_key_header", [False, True], ids=["no credentials", "the API key as a bearer header"])
def test_no_page_or_asset_is_served_without_the_cookie(gateway: GatewayThread, with_key_header: bool) -> None:
    headers = gateway.headers() if with_key_header else {}  # the API's bearer key is not the web view's login
    with _browser(gateway) as client:
        for path in PAGES:
            answer = client.get(path, headers=headers)
            assert answer.status_code in (303, 401), (path, answer.status_code)
            if answer.status_code == 303:
                assert answer.headers["location"].startswith("/web/login?next="), path
            assert "htmx" not in answer.text and "<table" not in answer.text, path
        fragment = client.get("/web/runs", headers={**headers, "HX-Request": "true"})
        assert fragment.status_code == 401 and "log in first" in fragment.text
        assert client.get("/web/login").status_code == 200
        style = client.get("/web/static/style.css")
        assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")


def test_the_cookie_is_httponly_strict_and_opens_the_pages(gateway: GatewayThread) -> None:
    with _browser(gateway) as client:
        answer = client.post("/web/login", data={"key": api_key(gateway.root)}, headers=_same_origin(gateway))
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        page = client.get("/")
        assert page.status_code == 200 and "Overview" in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert client.get("/web/static/vendor/htmx-2.0.11.min.js").status_code == 200


def test_a_forged_cross_site_post_is_refused_and_changes_nothing(gateway: GatewayThread) -> None:
    with _logged_in(gateway) as client:
        sid = httpx.post(f"{gateway.url}/api/sessions", json={"title": "t"}, headers=gateway.headers()).json()
        sid = sid["session"]["id"]
        token = _csrf(client, f"/web/sessions/{sid}")
        form = {"message": "transfer everything", "csrf": token, "key": "web-forged"}
        forged = client.post(f"/web/sessions/{sid}/send", data=form, headers={"Origin": "http://evil.example"})
        assert forged.status_code == 403 and "cross_site_request" in forged.text
        cross = client.post(f"/web/sessions/{sid}/send", data=form, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403
        tokenless = client.post(f"/web/sessions/{sid}/send", data={**form, "csrf": ""}, headers=_same_origin(gateway))
        assert tokenless.status_code == 403 and "csrf_failed" in tokenless.text
        stop = client.post("/web/runs/run_x/stop", data={"csrf": "0" * 64}, headers=_same_origin(gateway))
        assert stop.status_code == 403
        messages = httpx.get(f"{gateway.url}/api/sessions/{sid}/messages", headers=gateway.headers()).json()
        assert messages["data"] == []  # nothing was sent
        sent = client.post(f"/web/sessions/{sid}/send", data=form, headers=_same_origin(gateway))
        assert sent.status_code == 303  # the same form from the gateway's own page goes through
        again = client.post(f"/web/sessions/{sid}/send", data=form, headers=_same_origin(gateway))
        assert again.status_code == 303  # sent twice: one run (the form's key)
        runs = httpx.get(f"{gateway.url}/v1/ledger", headers=gateway.headers()).json()["data"]
        assert [r["message"] for r in runs] == ["transfer everything"]


def test_the_key_is_in_no_page_cookie_or_log(gateway: GatewayThread) -> None:
    key = api_key(gateway.root)
    with _browser(gateway) as client:
        wrong = client.post("/web/login", data={"key": key[:-1] + "x"}, headers=_same_origin(gateway))
        assert wrong.status_code == 401 and key[:-1] not in wrong.text
    with _logged_in(gateway) as client:
        answer = httpx.post(f"{gateway.url}/v1/runs", json={"input": "hi"}, headers=gateway.headers()).json()
        pages = ["/", "/web/runs", "/web/ledger", f"/web/runs/{answer['run_id']}", f"/web/exchanges/{answer['run_id']}"]
        for path in [*pages, "/web/ledger?state=bogus", "/web/nowhere"]:
            page = client.get(path)
            assert page.status_code in (200, 400, 404) and "<html" in page.text, path
            assert key not in page.text, path
            assert "Traceback" not in page.text, path
        assert all(key not in value for value in client.cookies.values())
    assert key not in gateway.log()


def test_bad_input_gets_a_page_that_names_it(gateway: GatewayThread) -> None:
    with _logged_in(gateway) as client:
        bad = client.get("/web/ledger?state=bogus")
        assert bad.status_code == 400 and "no ledger outcome &#39;bogus&#39;" in bad.text
        missing = client.get("/web/sessions/nope")
        assert missing.status_code == 404 and "nope" in missing.text
        empty = client.post(
            "/web/sessions/nope/send", data={"message": "", "csrf": _csrf(client)}, headers=_same_origin(gateway)
        )
        assert empty.status_code == 404


def test_a_peer_key_does_not_log_in(gateway: GatewayThread) -> None:
    peer_key = "bc_" + "p" * 40
    added = run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:9", input=peer_key)
    assert added.exit_code == 0, added.stderr
    with _browser(gateway) as client:
        refused = client.post("/web/login", data={"key": peer_key}, headers=_same_origin(gateway))
        assert refused.status_code == 401 and "set-cookie" not in refused.headers
        assert client.get("/").status_code == 303
        cross = client.post(
            "/web/login", data={"key": api_key(gateway.root)}, headers={"Origin": "http://evil.example"}
        )
        assert cross.status_code == 403 and "set-cookie" not in cross.headers


def test_logging_out_closes_the_door_for_that_cookie_across_a_restart(gateway: GatewayThread) -> None:
    with _logged_in(gateway) as client, _logged_in(gateway) as other:
        cookie = dict(client.cookies)
        out = client.post("/web/logout", data={"csrf": _csrf(client)}, headers=_same_origin(gateway))
        assert out.status_code == 303 and out.headers["location"] == "/web/login"
        kept = dict(other.cookies)  # another browser, still logged in
    with _browser(gateway) as replay:
        replay.cookies.update(cookie)  # the old cookie, kept by someone: it no longer opens anything
        assert replay.get("/").status_code == 303
    gateway.restart()
    with _browser(gateway) as replay:
        replay.cookies.update(cookie)  # nor after the gateway restarted
        assert replay.get("/").status_code == 303
    with _browser(gateway) as still:
        still.cookies.update(kept)
        assert still.get("/").status_code == 200  # a logout is one browser's, not everyone's


def test_ten_failed_logins_in_a_minute_shut_the_form_even_for_the_right_key(gateway: GatewayThread) -> None:
    with _browser(gateway) as client:
        for n in range(10):
            wrong = client.post("/web/login", data={"key": f"guess-{n}"}, headers=_same_origin(gateway))
            assert wrong.status_code == 401, (n, wrong.status_code)
        right = client.post("/web/login", data={"key": api_key(gateway.root)}, headers=_same_origin(gateway))
        assert right.status_code == 429 and "set-cookie" not in right.headers
        assert 1 <= int(right.headers["retry-after"]) <= 60
        assert "10 failed logins from 127.0.0.1" in right.text and api_key(gateway.root) not in right.text
        assert client.get("/").status_code == 303  # still logged out


def test_the_ledger_and_an_exchange_page_show_what_the_runs_used(gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "lead").exit_code == 0
    sent = run_cli("send", "lead", "four words right here", "--json")
    assert sent.exit_code == 0, sent.stderr
    run_id = json.loads(sent.stdout)["run_id"]
    shown = json.loads(run_cli("runs", "show", run_id, "--json").stdout)
    total = shown["tokens_in"] + shown["tokens_out"]
    assert total > 0
    with _logged_in(gateway) as client:
        ledger = client.get("/web/ledger").text
        assert '<td class="spent">' + f"{total:,}" in ledger
        assert "Tokens per pair per day" in ledger and "<td>human:cli</td><td>lead</td><td>1</td>" in ledger
        exchange = client.get(f"/web/exchanges/{run_id}").text
        assert f"{total:,} tokens" in exchange and 'id="exchange-spent"' in exchange
