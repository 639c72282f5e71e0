"""`--json` prints exactly one JSON object on stdout whatever happens, errors included, beside the exit code."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import free_port, run_cli


def one_object(stdout: str) -> dict[str, object]:
    body = json.loads(stdout)  # the whole of stdout is one JSON document
    assert isinstance(body, dict), body
    return body


def test_a_usage_error_under_json_is_one_refused_object(initialised: Path) -> None:
    result = run_cli("send", "nobody", "hi", "--json")
    assert result.exit_code == 2
    body = one_object(result.stdout)
    assert body["result"] == "refused"
    assert body["error"]["code"] == "not_found" and "nobody" in body["error"]["message"]  # type: ignore[index]
    assert "error:" in result.stderr


def test_a_failed_local_send_under_json_names_its_run(initialised: Path) -> None:
    result = run_cli("send", "default", "/fail broken on purpose", "--json")
    assert result.exit_code == 1
    body = one_object(result.stdout)
    assert body["result"] == "failed"
    error = body["error"]
    assert isinstance(error, dict) and "broken on purpose" in error["message"]
    assert str(error["run_id"]).startswith("run_") and error["state"] == "failed"


def test_an_unknown_or_unreachable_peer_under_json(initialised: Path) -> None:
    unknown = run_cli("peer", "dm", "nosuchpeer", "hi", "--json")
    assert unknown.exit_code == 2
    assert one_object(unknown.stdout)["result"] == "refused"

    port = free_port()
    assert (
        run_cli("peer", "add", "closed", "--url", f"http://127.0.0.1:{port}", "--key", "closed-key-123").exit_code == 0
    )
    unreachable = run_cli("peer", "dm", "closed", "anyone?", "--json")
    assert unreachable.exit_code == 1
    body = one_object(unreachable.stdout)
    assert body["result"] == "failed" and body["error"]["code"] == "peer_unreachable"  # type: ignore[index]
    assert body["error"]["message"] == (  # type: ignore[index]
        f"could not reach peer 'closed' at http://127.0.0.1:{port}: nothing accepted the connection; is it running,"
        " and is that its URL? (`backchannel doctor` checks each peer)"
    )


def test_a_bad_option_under_json_is_one_object_too(initialised: Path) -> None:
    result = run_cli("send", "default", "hi", "--wait", "soon", "--json")
    assert result.exit_code == 2
    assert one_object(result.stdout)["result"] == "refused"


def test_exit_codes_mean_one_thing_for_ledger_and_send(initialised: Path) -> None:
    assert run_cli("send", "nosuch", "hi").exit_code == 2
    unknown = run_cli("ledger", "nosuch", "--json")
    assert unknown.exit_code == 2, unknown.stdout
    assert one_object(unknown.stdout)["error"]["code"] == "not_found"  # type: ignore[index]
    assert run_cli("ledger", "default").exit_code == 0
    assert run_cli("ledger", "peer:anywhere").exit_code == 0  # a peer's history outlives its registration


_A_BUG = """
import sys
import click
from backchannel.cli import main
from backchannel.cli.app import cli

@cli.command("explode")
@click.option("--json", "as_json", is_flag=True)
def explode(as_json: bool) -> None:
    raise KeyError("a key nobody expected")

sys.argv = ["backchannel", "explode", *sys.argv[1:]]
main()
"""


def test_an_unexpected_error_is_one_line_and_one_object_not_a_traceback(initialised: Path) -> None:
    """A bug in a command (here a command made to raise) tells the person what happened in one line, under
    --json as one object, and shows its traceback only when BACKCHANNEL_DEBUG asks for it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "BACKCHANNEL_HOME": str(initialised)}
    env.pop("BACKCHANNEL_DEBUG", None)
    done = subprocess.run([sys.executable, "-c", _A_BUG, "--json"], env=env, capture_output=True, text=True)
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr and "internal error: KeyError" in done.stderr, done.stderr
    body = one_object(done.stdout)
    assert body["error"]["code"] == "internal_error" and "BACKCHANNEL_DEBUG" in body["error"]["message"]  # type: ignore[index]
    debug = subprocess.run(
        [sys.executable, "-c", _A_BUG], env={**env, "BACKCHANNEL_DEBUG": "1"}, capture_output=True, text=True
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "a key nobody expected" in debug.stderr
