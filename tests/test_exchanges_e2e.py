"""The hop floor binds an exchange, across two real gateways peered both ways (issue 21, audit item 2).

An agents' ping-pong between alpha and beta runs into the hop limit; the person's own fresh `peer dm` right
after is a new exchange, at hop 0, and is answered (it was refused "hop 3, past the limit of 2" when the floor
bound every exchange with that peer). Once over the Hermes dialect (X-Backchannel-Exchange), once over A2A
(the Backchannel extension's `exchange`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import GatewayProcess
from polling import eventually
from test_peers_e2e import Pair, _init_home, cli, ledger, messaging_rules, peer_key


def peered(
    base: Path, *, a2a: bool, env: Callable[[str], dict[str, str]] | None = None, profiles: tuple[str, ...] = ()
) -> Iterator[Pair]:
    """Two gateways, alpha and beta, peered both ways over the Hermes dialect or A2A; `env(name)`: variables
    for each gateway's process; `profiles`: made on alpha besides default."""
    alpha, beta = _init_home(base / "alpha"), _init_home(base / "beta")
    if env is not None:
        alpha.env, beta.env = env("alpha"), env("beta")
    for name in profiles:
        assert cli(alpha.root, "profile", "create", name).exit_code == 0
    p = Pair(alpha, beta, peer_key(alpha.root, "beta"), peer_key(beta.root, "alpha"))
    try:
        alpha.start()
        beta.start()
        for home, name, gw, key in ((p.a, "beta", beta, p.beta_key), (p.b, "alpha", alpha, p.alpha_key)):
            url = f"{gw.url}/.well-known/agent-card.json" if a2a else gw.url
            added = cli(home, "peer", "add", name, "--url", url, "--key", key, "--no-key-back")
            assert added.exit_code == 0, added.stderr
        yield p
    finally:
        alpha.kill()
        beta.kill()


@pytest.fixture(scope="module", params=["hermes-dialect", "a2a"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    yield from peered(tmp_path_factory.mktemp(f"exchanges-{request.param}"), a2a=request.param == "a2a")


def rally(*targets: str) -> str:
    """A message that makes each echo agent in turn send the rest on to the next target, without waiting."""
    message = "the end of the rally"
    for target in reversed(targets):
        message = "/tool send_to_peer " + json.dumps({"target": target, "message": message, "wait_seconds": 0})
    return message


def wait_for(gw: GatewayProcess, found: Callable[[], bool], what: str, within: float = 30.0) -> None:
    eventually(found, within=within, what=f"{what} did not happen on {gw.url}", every=0.1)


def test_a_ping_pong_at_the_hop_limit_leaves_the_persons_next_message_free(pair: Pair) -> None:
    """alpha → beta (hop 1) → alpha (hop 2) → beta: refused at alpha (hop 3, max_hops 2). The person's fresh
    `peer dm` from alpha then reaches beta at hop 0, in an exchange of its own."""
    with (
        messaging_rules(pair.a, "default", allow=["peer:beta"], max_hops=2),
        messaging_rules(pair.b, "default", allow=["peer:alpha"], max_hops=2),
    ):
        sent = cli(pair.a, "send", "default", rally("beta", "alpha", "beta", "alpha"), "--json")
        assert sent.exit_code == 0, sent.stderr
        wait_for(pair.alpha, lambda: any(e["state"] == "refused:hop_limit" for e in ledger(pair.a)), "the refusal")
        # beta sent its hop 2 on to alpha: by our own records beta's exchange with alpha is at hop 2 and over.
        assert max(e["hops"] for e in ledger(pair.b) if e["target"].startswith("peer:alpha")) == 2
        fresh = cli(pair.a, "peer", "dm", "beta", "a fresh question from the person", "--json")
        assert fresh.exit_code == 0, (fresh.stdout, fresh.stderr)
        assert json.loads(fresh.stdout)["reply"] == "default (echo): a fresh question from the person"
    [arrived] = [e for e in ledger(pair.b) if e["message"] == "a fresh question from the person"]
    assert (arrived["hops"], arrived["state"]) == (0, "completed"), arrived
    # The rally's own messages on beta share one exchange (alpha's), apart from the person's new one.
    rallied = {e["origin"] for e in ledger(pair.b) if e["message"].startswith(("/tool send_to_peer", "the end"))}
    assert len(rallied) == 1 and arrived["origin"] not in rallied, (rallied, arrived)
