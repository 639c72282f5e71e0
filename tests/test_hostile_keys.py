"""What one hostile peer key cannot do to the person (issue 38): fill the disk with refused messages, or steer a
message into a turn it does not own. A real gateway, raw HTTP with a peer key made by `backchannel key create`."""

from __future__ import annotations

from pathlib import Path

import httpx

from conftest import use_shared_store
from gateway_http import client, gateway_with, set_messaging
from store_audit import _rows
from test_trust_keys import as_key, bot_chat, dm, ledger, make_key, wait_run

RATE = 5  # gateway.max_runs_per_sender_per_minute in these tests
BIG = "x" * 65_000  # a refused message's text as large as a request may carry


def _refused_texts(root: Path) -> list[int]:
    """The length of the text each kept refusal holds, read from the store itself."""
    return [int(r["n"]) for r in _rows(root, "SELECT LENGTH(message) AS n FROM refusals")]


def _outcome(answer: httpx.Response) -> str:
    """What a peer's send came to: the envelope's result, or the error's code."""
    body = answer.json()
    return str(body["result"] if answer.status_code == 200 else body["error"]["code"])


def _flood_refused(root: Path, *, profiles: int) -> list[str]:
    """A peer the profile does not accept sends 4x its rate of 65 KB messages, naming `profiles` sending profiles in
    turn; what each came to."""
    set_messaging(root, "default", accept=["research"])  # spark is not accepted: each message is refused
    key = make_key("spark")
    with gateway_with(root, max_runs_per_sender_per_minute=RATE) as gw, client(gw) as person, as_key(gw, key) as c:
        sid = bot_chat(person)
        codes = [
            _outcome(dm(c, sid, f"{n} {BIG}", f"big-{n}", **{"X-Hermes-Sender-Profile": f"agent{n % profiles}"}))
            for n in range(4 * RATE)
        ]
        refused = [e for e in ledger(person) if e.get("outcome") == "refused"]
        assert refused and all(len(e["message"]) < 600 for e in refused), [len(e["message"]) for e in refused]
    return codes


def test_a_peer_past_its_rate_of_refused_messages_is_429_and_nothing_is_written(initialised: Path) -> None:
    codes = _flood_refused(initialised, profiles=1)
    assert codes[:RATE] == ["refused"] * RATE, codes  # and kept in the ledger
    assert codes[RATE:] == ["rate_limited"] * (3 * RATE), codes  # past the rate: told so (429), nothing kept
    kept = _refused_texts(initialised)
    assert len(kept) == RATE and max(kept) < 600, kept  # an excerpt of each, never its 65 KB


def test_naming_other_sending_profiles_does_not_pass_a_keys_rate_of_refusals(initialised: Path) -> None:
    codes = _flood_refused(initialised, profiles=4 * RATE)  # a new sending profile for every message
    assert codes.count("refused") == RATE and codes.count("rate_limited") == 3 * RATE, codes
    assert len(_refused_texts(initialised)) == RATE


def test_refusals_count_against_a_peers_rate_on_a_shared_store(initialised: Path, postgres_url: str) -> None:
    use_shared_store(initialised, postgres_url)
    codes = _flood_refused(initialised, profiles=2)
    assert codes.count("refused") == RATE and codes.count("rate_limited") == 3 * RATE, codes
    assert len(_refused_texts(initialised)) == RATE


def test_a_peers_steer_never_joins_a_turn_the_person_started(initialised: Path) -> None:
    """A peer's `X-Backchannel-Mode: steer` to a session running the person's turn is queued (and says so): the
    person's run answers the person's message alone, the peer's its own, in turn."""
    set_messaging(initialised, "default", accept=["peer:spark/*"])
    key = make_key("spark")
    with gateway_with(initialised) as gw, client(gw) as person, as_key(gw, key) as c:
        sid = bot_chat(person)
        busy = person.post("/v1/runs", json={"input": "/sleep 2\nthe person's question", "session_id": sid})
        assert busy.status_code == 202, busy.text
        run_id = busy.json()["run_id"]
        wait_run(person, run_id, {"running"})
        steer = c.post(
            f"/api/sessions/{sid}/chat",
            json={"message": "the peer's words"},
            headers={"X-Backchannel-Mode": "steer", "X-Hermes-Wait-Seconds": "30"},
        )
        assert steer.status_code == 200, steer.text
        answer = steer.json()
        assert answer["landed"] == "queued", answer
        assert answer["message"]["content"] == "default (echo): the peer's words", answer  # its own turn answered it
        mine = wait_run(person, run_id, {"completed"})
        assert mine["output"] == "default (echo): the person's question", mine  # nothing of the peer's in it
