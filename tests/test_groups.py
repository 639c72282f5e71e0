"""Groups (issue 25): `group:NAME` reaches every member, each as if sent alone, with one outcome per member.

Through the real CLI, with a gateway of this home running (the HTTP group route) and without (in-process), and a
second home's gateway as a peer member: a member delivered, one on the peer, one the peer refuses, one that names
nothing any more; each its own run, the exit code the highest of the members'; an agent's send_to_session to a
group under its own rules (a member it may not message refused, itself skipped); `@group:` mentions; the same
group send asked again answers for the same runs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import GatewayThread, api_key, run_cli
from gateway_http import gateway_with, other_home, set_messaging


def cli(root: Path, *args: str) -> Any:
    return run_cli(*args, env={"BACKCHANNEL_HOME": str(root)})


@pytest.fixture
def spark(tmp_path: Path) -> Iterator[GatewayThread]:
    """Another home's gateway, known here as peer `spark` with a key that reaches its default profile only."""
    with other_home(tmp_path / "spark", "ops") as gw:
        yield gw


@pytest.fixture
def team(initialised: Path, spark: GatewayThread) -> Path:
    made = cli(spark.root, "key", "create", "home", "--profile", "default", "--json")
    key = json.loads(made.stdout)["key"]
    added = run_cli("peer", "add", "spark", "--url", spark.url, "--key", key, "--no-key-back")
    assert added.exit_code == 0, added.stderr
    for name in ("research", "ghost"):
        assert run_cli("profile", "create", name).exit_code == 0
    made = run_cli("group", "create", "team", "research", "peer:spark", "peer:spark/ops", "ghost")
    assert made.exit_code == 0, made.stderr
    shutil.rmtree(initialised / "profiles" / "ghost")  # a member that names nothing any more
    return initialised


def by_target(sent: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["target"]: m for m in sent["results"]}


@pytest.mark.parametrize("via", ["gateway", "in-process"])
def test_a_group_send_gives_every_member_its_own_outcome(team: Path, spark: GatewayThread, via: str) -> None:
    def send(*extra: str) -> Any:
        return run_cli("send", "group:team", "stand-up: what are you on?", "--json", *extra)

    if via == "gateway":
        with gateway_with(team):
            done = send("--idempotency-key", "k-standup")
            again = send("--idempotency-key", "k-standup")
    else:
        done = send("--idempotency-key", "k-standup")
        again = send("--idempotency-key", "k-standup")
    sent = json.loads(done.stdout)
    members = by_target(sent)
    assert list(members) == ["research", "peer:spark", "peer:spark/ops", "ghost"]  # in the group's order
    assert members["research"]["result"] == "delivered"
    assert members["research"]["reply"] == "research (echo): stand-up: what are you on?"
    assert members["peer:spark"]["result"] == "delivered"
    assert members["peer:spark"]["reply"] == "default (echo): stand-up: what are you on?"
    assert members["peer:spark/ops"]["result"] == "refused", members["peer:spark/ops"]  # the key reaches default only
    assert members["ghost"]["result"] == "failed" and "ghost" in members["ghost"]["error"]["message"]
    assert sent["reached"] == "2/4" and sent["result"] == "refused"
    assert done.exit_code == 2  # the highest of the members' codes: a refusal

    ledger = json.loads(run_cli("ledger", "--json").stdout)  # each member that got the message: its own entry
    assert len([e for e in ledger if e["message"] == "stand-up: what are you on?"]) == 3, ledger
    replayed = by_target(json.loads(again.stdout))  # the same group send again: the same runs, answered again
    for target in ("research", "peer:spark"):
        assert replayed[target]["replayed"] is True and replayed[target]["run_id"] == members[target]["run_id"]
    there = json.loads(cli(spark.root, "ledger", "--json").stdout)
    assert len([e for e in there if e["message"] == "stand-up: what are you on?"]) == 1, there


def test_the_text_output_is_a_block_per_member_and_how_many_were_reached(team: Path) -> None:
    done = run_cli("send", "group:team", "hello all")
    assert done.exit_code == 2
    assert "[research] delivered\nresearch (echo): hello all\n" in done.stdout
    assert "[peer:spark/ops] refused\n" in done.stdout and "[ghost] failed\n" in done.stdout
    assert done.stdout.rstrip().endswith("reached 2/4")


def test_an_agents_group_send_goes_under_its_own_rules_and_skips_itself(initialised: Path) -> None:
    for name in ("lead", "research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "lead", allow=["research"])
    assert run_cli("group", "create", "crew", "lead", "research", "builds").exit_code == 0
    done = run_cli("send", "lead", "/send group:crew what is left to do?", "--json")
    assert done.exit_code == 0, done.stderr
    tool = json.loads(done.stdout)["reply"].split("→ send_to_session: ", 1)[1]
    sent = json.loads(tool)
    members = by_target(sent)
    assert members["lead"] == {"target": "lead", "result": "skipped", "why": "the sender itself"}
    assert members["research"]["result"] == "delivered"
    assert members["builds"]["result"] == "refused" and members["builds"]["error"]["code"] == "not_allowed"
    assert sent["reached"] == "1/2"


def test_a_group_mention_is_answered_by_every_member_first(initialised: Path) -> None:
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    assert run_cli("group", "create", "crew", "research", "builds").exit_code == 0
    set_messaging(initialised, "default", allow=["research", "builds"])
    done = run_cli("send", "default", "@group:crew any blockers?", "--json")
    assert done.exit_code == 0, done.stderr
    reply = json.loads(done.stdout)["reply"]
    assert "research (echo): any blockers?" in reply and "builds (echo): any blockers?" in reply
    assert "@group:crew: reached 2/2" in reply


def test_group_bad_input(initialised: Path) -> None:
    unknown = run_cli("send", "group:nope", "hi")
    assert unknown.exit_code == 2 and "no group 'nope' (groups: none)" in unknown.stderr
    assert run_cli("group", "create", "a", "default").exit_code == 0
    assert run_cli("group", "create", "b", "group:a").exit_code == 0
    assert run_cli("group", "add", "a", "group:b").exit_code == 0  # a cycle: refused when it is sent to
    cycle = run_cli("send", "group:a", "hi")
    assert cycle.exit_code == 2 and "contains itself (a → b → a)" in cycle.stderr, cycle.stderr
    for args, words in (
        (("group", "create", "a", "default"), "exists already"),
        (("group", "add", "a", "nosuch"), "no profile 'nosuch'"),
        (("group", "add", "a", "peer:nowhere"), "no peer 'nowhere'"),
        (("group", "remove", "a", "research"), "has no member 'research'"),
        (("group", "show", "zzz"), "no group 'zzz'"),
        (("group", "create", "Bad Name"), "invalid group name"),
    ):
        result = run_cli(*args)
        assert result.exit_code == 2 and words in result.stderr, (args, result.stderr)
    assert run_cli("group", "remove", "b").exit_code == 0
    assert json.loads(run_cli("group", "list", "--json").stdout) == [{"name": "a", "members": ["default", "group:b"]}]
    assert api_key(initialised)  # the home is intact


def test_doctor_names_a_member_that_names_nothing(team: Path) -> None:
    found = json.loads(run_cli("doctor", "--json").stdout)
    check = next(c for c in found["checks"] if c["check"] == "group team")
    assert check["status"] == "warn" and "ghost: no profile 'ghost'" in check["detail"], check
    assert check["fix"].startswith("`backchannel group remove team ghost`"), check  # the member named, to paste
