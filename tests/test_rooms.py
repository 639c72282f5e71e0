"""Rooms (issue 25): the person and several agents in one durable, ordered transcript.

Through the real CLI, a gateway of this home and a second home's gateway as a peer member: each member answers in
turn what was said since its last turn; a member (the openai engine on the scripted model, for words of its own)
hands the floor to another by naming it; a gateway killed mid-room is followed after its restart by the member
whose turn it was, its run the same run; the cap on answers per message; what a room refuses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backchannel.home import config
from conftest import GatewayProcess, GatewayThread, api_key, run_cli
from gateway_http import gateway_with, other_home
from polling import eventually
from scripted_model import ScriptedModel

HAND_OFF = "the cache fix is in; @research can you check the numbers?"


def cli(root: Path, *args: str) -> Any:
    return run_cli(*args, env={"BACKCHANNEL_HOME": str(root)})


def transcript(name: str) -> list[dict[str, Any]]:
    shown = run_cli("room", "show", name, "--json")
    assert shown.exit_code == 0, shown.stderr
    return list(json.loads(shown.stdout)["lines"])


def until_line(name: str, speaker: str, state: str, within: float = 30.0) -> list[dict[str, Any]]:
    return eventually(
        lambda: transcript(name),
        lambda lines: any(line["speaker"] == speaker and line["state"] == state for line in lines),
        within=within,
        what=lambda lines: f"{speaker} never {state}: {lines}",
    )


@pytest.fixture
def spark(tmp_path: Path) -> Iterator[GatewayThread]:
    """Another home's gateway, to be known here as peer `spark` (its key reaches its default agent)."""
    with other_home(tmp_path / "spark") as gw:
        yield gw


def test_members_answer_in_turn_and_one_hands_the_floor_by_name(initialised: Path, spark: GatewayThread) -> None:
    made = cli(spark.root, "key", "create", "home", "--profile", "default", "--json")
    key = json.loads(made.stdout)["key"]
    added = run_cli("peer", "add", "spark", "--url", spark.url, "--key", key, "--no-key-back")
    assert added.exit_code == 0, added.stderr
    with ScriptedModel([HAND_OFF]) as model:
        made = run_cli("profile", "create", "builds", "--engine", "openai", "--base-url", model.base_url)
        assert made.exit_code == 0, made.stderr
        assert run_cli("profile", "create", "research").exit_code == 0
        members = ("--member", "builds", "--member", "peer:spark", "--member", "research")
        room = run_cli("room", "create", "standup", *members)
        assert room.exit_code == 0 and "room standup: builds, peer:spark, research" in room.stdout, room.stderr
        with gateway_with(initialised):
            said = run_cli("room", "say", "standup", "what is left for the release?")
            assert said.exit_code == 0, said.stderr
            again = run_cli("room", "say", "standup", "thanks, ship it", "--json")
            assert again.exit_code == 0, again.stderr
    assert len(model.requests) == 2
    lines = transcript("standup")
    speakers = [line["speaker"] for line in lines]
    # builds named research: research answered next, before the peer whose turn it was
    assert speakers[:4] == ["human:cli", "builds", "research", "peer:spark"], speakers
    assert all(line["state"] in ("said", "completed") for line in lines), lines
    assert lines[1]["text"] == HAND_OFF and lines[1]["run_id"]
    # research was given what builds said (and echo says back the person's words, not an echo of every echo)
    given_to_research = json.loads(run_cli("runs", "show", lines[2]["run_id"], "--json").stdout)["message"]
    assert HAND_OFF in given_to_research and lines[2]["text"] == "research (echo): what is left for the release?"
    assert lines[3]["text"] == "default (echo): what is left for the release?"  # the peer's agent too
    assert "[Room standup" not in lines[2]["text"]  # the briefing's headings are the agent's, not said words
    assert "[builds]\n" + HAND_OFF in said.stdout and "[research]\n" in said.stdout

    second = json.loads(again.stdout)
    later = {line["speaker"]: line["text"] for line in second["lines"]}
    assert second["done"] is True and set(later) == {"human:cli", "builds", "peer:spark", "research"}
    # each member is given what was said since its last turn, and only that: builds' second briefing has the others'
    # first answers and the new message, not the first message again as the person's
    given = model.requests[-1]["messages"][-1]["content"]
    assert "[Room standup — the person said:]\nthanks, ship it" in given, given
    assert "\n[Room standup — the person said:]\nwhat is left" not in given and "research said" in given, given
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    runs_here = [e for e in ledger if e["kind"] == "run" and e["sender"] == "human:room"]
    assert len(runs_here) == 4  # builds and research, twice; the peer's turns are the peer's
    assert len([e for e in ledger if e["kind"] == "peer"]) == 2


def test_a_rooms_messages_to_its_peer_and_local_members_come_from_one_sender(
    initialised: Path, spark: GatewayThread
) -> None:
    key = json.loads(cli(spark.root, "key", "create", "home", "--profile", "default", "--json").stdout)["key"]
    assert run_cli("peer", "add", "spark", "--url", spark.url, "--key", key, "--no-key-back").exit_code == 0
    assert run_cli("profile", "create", "research").exit_code == 0
    assert run_cli("room", "create", "pair", "--member", "research", "--member", "peer:spark").exit_code == 0
    with gateway_with(initialised):
        said = run_cli("room", "say", "pair", "status?")
        assert said.exit_code == 0, said.stderr
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    senders = [(e["kind"], e["sender"]) for e in ledger if e["kind"] in ("run", "peer")]
    assert sorted(senders) == [("peer", "human:room"), ("run", "human:room")], senders


def test_the_persons_at_name_hands_that_member_the_floor_and_echo_answers_do_not_pile_up(initialised: Path) -> None:
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    assert run_cli("room", "create", "standup", "--member", "research", "--member", "builds").exit_code == 0
    with gateway_with(initialised):
        for said in ("what is left for the release?", "@builds what about the tests?", "and the docs?"):
            assert run_cli("room", "say", "standup", said).exit_code == 0
    lines = [(line["speaker"], line["text"]) for line in transcript("standup")]
    assert lines == [
        ("human:cli", "what is left for the release?"),
        ("research", "research (echo): what is left for the release?"),
        ("builds", "builds (echo): what is left for the release?"),
        ("human:cli", "@builds what about the tests?"),
        ("builds", "builds (echo): @builds what about the tests?"),  # named: its floor first
        ("research", "research (echo): @builds what about the tests?"),
        ("human:cli", "and the docs?"),
        ("research", "research (echo): and the docs?"),  # the room's order again
        ("builds", "builds (echo): and the docs?"),
    ], lines


def test_a_room_turn_cut_by_a_kill_goes_on_with_the_member_whose_turn_it_was(initialised: Path) -> None:
    # builds' first model call is held until the gateway is killed (the scripted model answers it only when it
    # closes): the kill lands in its turn, whatever the machine's load. A `running` line alone does not say so: the
    # line is marked before the member's run is recorded, and a slow turn may be over before the kill.
    with ScriptedModel([{"delay": 600, "content": "never heard"}, "builds: the long one, done"]) as model:
        made = run_cli("profile", "create", "builds", "--engine", "openai", "--base-url", model.base_url)
        assert made.exit_code == 0, made.stderr
        assert run_cli("profile", "create", "research").exit_code == 0
        assert run_cli("room", "create", "night", "--member", "builds", "--member", "research").exit_code == 0
        with gateway_with(initialised, process=True) as gw:
            said = run_cli("room", "say", "night", "the long one", "--wait", "0")
            assert said.exit_code == 0, said.stderr
            eventually(lambda: len(model.requests), within=60, what="builds' turn never called its model")
            assert isinstance(gw, GatewayProcess)
            gw.kill()
        cut = transcript("night")[1]  # its run may be named there yet or not: the turn can start before that write
        assert cut["speaker"] == "builds" and cut["state"] == "running", cut
        (sent,) = builds_runs()
        run = json.loads(run_cli("runs", "show", sent, "--json").stdout)
        assert (run["state"], run["attempts"]) == ("running", 1), run  # its turn cut by the kill, not ended
        with gateway_with(initialised, process=True):
            # the room's lease (20-30 s of it left at the kill) is not waited for: its gateway is known to have ended
            lines = until_line("night", "research", "completed", within=15)
    assert [line["speaker"] for line in lines] == ["human:cli", "builds", "research"], lines
    builds = lines[1]
    assert builds["state"] == "completed" and builds["text"] == "builds: the long one, done"
    assert builds["run_id"] == sent and builds_runs() == [sent]
    run = json.loads(run_cli("runs", "show", sent, "--json").stdout)
    assert run["attempts"] == 2  # the same run, its turn run again after the kill: not asked twice
    assert len(model.requests) == 2  # the cut turn's call and its second attempt's, nothing more


def builds_runs() -> list[str]:
    """The runs the room sent builds, from the ledger."""
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    return [e["run_id"] for e in ledger if e["kind"] == "run" and e["target"].startswith("builds/")]


def test_answers_to_one_message_stop_at_the_rooms_cap(initialised: Path) -> None:
    for name in ("a", "b", "c"):
        assert run_cli("profile", "create", name).exit_code == 0
    data = config.load_yaml(config.config_path(initialised))
    data["rooms"] = {"agent_messages_per_message": 2}
    config.write_yaml(config.config_path(initialised), data)
    assert run_cli("room", "create", "trio", "--member", "a", "--member", "b", "--member", "c").exit_code == 0
    said = run_cli("room", "say", "trio", "go", "--json")
    assert said.exit_code == 0, said.stderr
    lines = json.loads(said.stdout)["lines"]
    assert [line["speaker"] for line in lines] == ["human:cli", "a", "b", "backchannel"]
    assert "2 answers to one message" in lines[-1]["text"] and "c not asked" in lines[-1]["text"]


def test_what_a_room_refuses(initialised: Path) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    data = config.load_yaml(config.config_path(initialised))
    data["rooms"] = {"max_members": 2}
    config.write_yaml(config.config_path(initialised), data)
    assert run_cli("group", "create", "team", "builds").exit_code == 0
    assert run_cli("room", "create", "ok", "--member", "builds").exit_code == 0
    for args, words in (
        (("room", "say", "nope", "hi"), "no room 'nope' (rooms: ok)"),
        (("room", "show", "nope"), "no room 'nope' (rooms: ok)"),
        (("room", "create", "ok", "--member", "builds"), "room 'ok' exists already"),
        (("room", "create", "self", "--member", "self"), "cannot be a member of itself"),
        (("room", "create", "big", "--member", "builds", "--member", "peer:x"), "unknown peer 'x'"),
        (("room", "create", "big", "--member", "builds", "--member", "default", "--member", "builds/y"), "max_members"),
        (("room", "create", "g", "--member", "group:team"), "name the group's members one by one"),
        (("room", "create", "Bad Name"), "invalid room name"),
        (("room", "add", "ok", "nosuch"), "nosuch"),
        (("room", "remove", "ok", "default"), "has no member 'default'"),
        (("room", "say", "ok"), "no message"),
    ):
        result = run_cli(*args)
        assert result.exit_code == 2 and words in result.stderr, (args, result.stderr)
    assert run_cli("room", "create", "empty").exit_code == 0
    empty = run_cli("room", "say", "empty", "anyone?")
    assert empty.exit_code == 2 and "has no members" in empty.stderr
    assert [r["name"] for r in json.loads(run_cli("room", "list", "--json").stdout)] == ["empty", "ok"]
    assert api_key(initialised)
