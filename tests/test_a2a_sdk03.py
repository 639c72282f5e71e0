"""The a2a-sdk 0.3.26 client (what many frameworks still ship) against a gateway whose v1.0 card carries
nothing of 0.3's: it reads the card's 0.3 shape where a 0.3 client looks (`/.well-known/agent.json`) or when
it asks for 0.3 (`A2A-Version: 0.3`), and is answered in 0.3 over JSON-RPC and HTTP+JSON.

The client runs in its own venv (`make a2a03`, or made here when missing): see tests/a2a03_client.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import a2a03_client
from a2a_client import ledger, shared_gateway
from conftest import GatewayProcess, api_key


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    a2a03_client.venv()
    yield from shared_gateway(tmp_path_factory, "a2a-sdk03")


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
def test_the_0_3_client_reads_the_legacy_card_and_is_answered(
    gw: GatewayProcess, transport: str, streaming: bool
) -> None:
    text = f"from a 0.3 client over {transport}, {'streamed' if streaming else 'sent'}"
    got = a2a03_client.run(
        gw.url,
        api_key(gw.root),
        card_path="/.well-known/agent.json",
        ask_0_3=False,
        transport=transport,
        text=text,
        streaming=streaming,
    )
    assert got["card"] == {"name": "default", "url": f"{gw.url}/a2a/jsonrpc", "protocolVersion": "0.3"}, got
    assert got["state"] == "completed" and "".join(got["said"]) == f"default (echo): {text}", got
    assert len([e for e in ledger(gw) if e["message"] == text]) == 1


def test_the_0_3_client_asking_for_0_3_gets_the_0_3_card_at_the_well_known_path(gw: GatewayProcess) -> None:
    got = a2a03_client.run(
        gw.url,
        api_key(gw.root),
        card_path="/.well-known/agent-card.json",
        ask_0_3=True,
        transport="JSONRPC",
        text="asked for 0.3",
    )
    assert got["card"]["protocolVersion"] == "0.3" and got["state"] == "completed", got
    assert got["said"] == ["default (echo): asked for 0.3"], got
