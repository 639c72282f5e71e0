"""`backchannel runs`: a person sees, follows and stops local runs, with or without a running gateway."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from backchannel.cli import output
from conftest import GatewayThread, run_cli


def receipt(text: str) -> dict[str, Any]:
    sent = run_cli("send", "default", text, "--wait", "0.1", "--json")
    assert sent.exit_code == 0, sent.stderr
    body: dict[str, Any] = json.loads(sent.stdout)
    assert body["result"] == "receipt", body
    return body


def test_runs_list_show_follow_and_stop_without_a_gateway(initialised: Path) -> None:
    # Without a gateway the command works the run itself and is cut after its grace: the run is queued again.
    slow = receipt("/sleep 1.5\nslow work")
    listed = run_cli("runs", "list", "--state", "queued", "--json")
    assert listed.exit_code == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [slow["run_id"]]

    shown = run_cli("runs", "show", slow["run_id"], "--json")
    assert shown.exit_code == 0, shown.stderr  # still going: a receipt
    assert json.loads(shown.stdout)["state"] == "queued"

    followed = run_cli("runs", "follow", slow["run_id"])
    assert followed.exit_code == 0, followed.stderr
    assert "default (echo): slow work" in followed.stdout
    assert "run.completed" in followed.stderr  # its progress, as it came

    other = receipt("/sleep 1.5\nnever mind")
    stopped = run_cli("runs", "stop", other["run_id"], "--json")
    assert stopped.exit_code == 0, stopped.stderr  # the stop worked (the run's outcome: failed, cancelled)
    body = json.loads(stopped.stdout)
    assert (body["result"], body["state"], body["stopped"]) == ("failed", "cancelled", True), body
    assert json.loads(run_cli("runs", "show", other["run_id"], "--json").stdout)["state"] == "cancelled"
    assert run_cli("runs", "show", other["run_id"]).exit_code == 1  # it ended without a reply

    everything = json.loads(run_cli("runs", "list", "--json").stdout)
    assert {r["run_id"] for r in everything} >= {slow["run_id"], other["run_id"]}
    assert run_cli("runs", "show", "run_nope").exit_code == 2
    assert run_cli("runs", "list", "-p", "nobody").exit_code == 2


def test_runs_follow_and_stop_through_the_gateway(gateway: GatewayThread) -> None:
    slow = receipt("/sleep 0.5\nthrough the gateway")
    assert slow["via"] == "gateway"
    followed = run_cli("runs", "follow", slow["run_id"], "--json")
    assert followed.exit_code == 0, followed.stderr
    done = json.loads(followed.stdout)
    assert done["result"] == "delivered" and done["reply"] == "default (echo): through the gateway"

    long = receipt("/sleep 30\ntoo long")
    stopped = run_cli("runs", "stop", long["run_id"], "--json")
    assert stopped.exit_code == 0, stopped.stderr
    assert json.loads(stopped.stdout)["state"] == "cancelled" and json.loads(stopped.stdout)["stopped"]


def test_a_run_is_named_by_the_start_of_its_id_as_a_table_shows_it(gateway: GatewayThread) -> None:
    done = run_cli("send", "default", "named short", "--json")
    assert done.exit_code == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    for short in (run_id[:10], run_id[:12] + "…"):
        shown = run_cli("runs", "show", short, "--json")
        assert shown.exit_code == 0, shown.stderr
        assert json.loads(shown.stdout)["run_id"] == run_id
    stopped = run_cli("runs", "stop", run_id[:10], "--json")
    assert stopped.exit_code == 0, stopped.stderr
    assert json.loads(stopped.stdout)["run_id"] == run_id  # it had ended: nothing to stop
    followed = run_cli("runs", "follow", run_id[:10], "--json")
    assert followed.exit_code == 0, followed.stderr
    assert json.loads(followed.stdout)["reply"] == "default (echo): named short"
    listed = run_cli("runs", "list", env={"BACKCHANNEL_COLUMNS": "60"}).stdout.splitlines()
    cut = listed[1].split()[0]  # as a person on a narrow terminal copies it
    assert cut.endswith("…") and run_id.startswith(cut[:-1]) and len(cut) < len(run_id), listed
    assert json.loads(run_cli("runs", "show", cut, "--json").stdout)["run_id"] == run_id
    too_short = run_cli("runs", "show", run_id[:6])
    assert too_short.exit_code == 2 and "first 8 characters or more" in too_short.stderr, too_short.stderr


def test_the_start_of_several_runs_ids_is_refused_naming_them(initialised: Path, monkeypatch: Any) -> None:
    made = iter(["run_abcd0000" + "0" * 23 + "1", "run_abcd0000" + "0" * 23 + "2"])
    monkeypatch.setattr("backchannel.store.runs.new_run_id", lambda: next(made))
    for text in ("first", "second"):
        assert run_cli("send", "default", text).exit_code == 0
    both = run_cli("runs", "show", "run_abcd0000")
    assert both.exit_code == 2, both.stderr
    whole = "run_abcd" + "0" * 27
    assert f"starts the ids of several runs ({whole}1, {whole}2): give more of it" in both.stderr, both.stderr
    assert json.loads(run_cli("runs", "show", whole + "2", "--json").stdout)["message"] == "second"


def test_runs_follow_says_still_running_and_for_how_long_through_a_silence(
    gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long turn says nothing between its start and its end: the follower says it goes on, after each quiet
    interval (30 s; shortened here), in text mode only (not under --json). No line names an event's missing detail."""
    monkeypatch.setattr(output, "STILL_RUNNING_SECONDS", 0.4)
    slow = receipt("/sleep 2\nlong work")
    followed = run_cli("runs", "follow", slow["run_id"])
    assert followed.exit_code == 0, followed.stderr
    still = [line for line in followed.stderr.splitlines() if line.startswith("still running (")]
    assert len(still) >= 2 and re.fullmatch(r"still running \(\d+s\)", still[-1]), followed.stderr
    assert "default (echo): long work" in followed.stdout and "None" not in followed.stderr, followed.stderr
    quiet = run_cli("runs", "follow", receipt("/sleep 1.5\nin json")["run_id"], "--json")
    assert quiet.exit_code == 0 and "still running" not in quiet.stderr, quiet.stderr
