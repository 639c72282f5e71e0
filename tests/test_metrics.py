"""`GET /metrics` (issue 27): the gateway's metrics in the Prometheus text format, scraped after a scripted exchange.

Through the real CLI and a gateway of this home: a busy session (queue depth and running turns read from the store),
an agent's send delivered, one refused, one to a peer that cannot be reached; then the counts of runs by state and
outcome, refusals by code, peer calls, tokens and the turn histogram. Only the person's key and a key made with
`--metrics` scrape; the latter reaches nothing else.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port, run_cli
from gateway_http import gateway_with, set_messaging


def scrape(url: str, key: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def sent(*args: str) -> dict[str, Any]:
    done = run_cli("send", *args, "--json")
    assert done.exit_code == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_scrape_counts_what_the_gateway_did(initialised: Path) -> None:
    for name in ("lead", "builds", "secret"):
        assert run_cli("profile", "create", name).exit_code == 0
    nowhere = f"http://127.0.0.1:{free_port()}"
    added = run_cli("peer", "add", "dead", "--url", nowhere, "--key", "bc_nothing", "--no-key-back")
    assert added.exit_code == 0, added.stderr
    set_messaging(initialised, "lead", allow=["builds", "peer:dead"])
    key = run_cli("key", "show").stdout.strip()
    with gateway_with(initialised) as gw:
        busy = sent("builds", "/sleep 2\nbusy", "--wait", "0")
        waiting = sent("builds", "after it", "--wait", "0")
        assert waiting["state"] == "queued"
        live = scrape(gw.url, key)
        assert value(live, "backchannel_running_turns", profile="builds") == 1
        assert value(live, "backchannel_queue_depth", profile="builds") == 1

        sent("lead", "/send builds status?")
        sent("lead", "/send secret let me in")  # refused: not in lead's allow list
        sent("lead", "/peer dead are you there?")  # nothing listens there
        deadline = time.monotonic() + 30
        while run_cli("runs", "wait-idle", "builds", "--timeout", "0").exit_code != 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        done = scrape(gw.url, key)
    assert value(done, "backchannel_runs_total", profile="lead", state="completed", outcome="delivered") == 3
    assert value(done, "backchannel_runs_total", profile="builds", state="completed", outcome="delivered") == 3
    assert value(done, "backchannel_refusals_total", code="not_allowed") == 1
    assert value(done, "backchannel_peer_calls_total", peer="dead", outcome="failed") == 1
    assert value(done, "backchannel_turn_duration_seconds_count", profile="lead") == 3
    assert value(done, "backchannel_queue_wait_seconds_count", profile="builds") == 3
    assert value(done, "backchannel_queue_depth", profile="builds") == 0
    builds = json.loads(run_cli("runs", "list", "-p", "builds", "--json").stdout)
    assert value(done, "backchannel_model_tokens_total", profile="builds", direction="out") == sum(
        r["tokens_out"] for r in builds
    )
    slow = json.loads(run_cli("runs", "show", busy["run_id"], "--json").stdout)
    assert slow["finished_at"] - slow["created_at"] >= 2  # the /sleep turn is among the histogram's longer ones
    assert value(done, "backchannel_turn_duration_seconds_bucket", profile="builds", le="1.0") == 2
    assert value(done, "backchannel_store_commit_duration_seconds_count") >= 6


def test_only_the_persons_key_or_a_metrics_key_scrapes(initialised: Path) -> None:
    made = run_cli("key", "create", "prom", "--metrics", "--json")
    assert made.exit_code == 0, made.stderr
    prom = json.loads(made.stdout)
    assert prom["metrics"] is True and prom["profiles"] == []
    peer = json.loads(run_cli("key", "create", "spark", "--json").stdout)["key"]
    with gateway_with(initialised) as gw:
        assert httpx.get(f"{gw.url}/metrics").status_code == 401
        refused = httpx.get(f"{gw.url}/metrics", headers={"Authorization": f"Bearer {peer}"})
        assert refused.status_code == 403 and "--metrics" in refused.json()["error"]["message"]
        scraped = scrape(gw.url, prom["key"])  # the figures, for the key made to scrape them
        assert not [name for name, _ in scraped if name == "backchannel_queue_depth"]  # nothing queued anywhere
        chat = httpx.post(
            f"{gw.url}/api/sessions", json={}, headers={"Authorization": f"Bearer {prom['key']}"}, timeout=10
        )
        assert chat.status_code == 403  # a key that scrapes reaches no profile
