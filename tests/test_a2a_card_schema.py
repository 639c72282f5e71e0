"""What Backchannel serves validates against the A2A v1.0 JSON schema (vendored in tests/schemas: generated from
the protocol's proto, Apache-2.0): the agent card (nothing of 0.3's in it, every field the proto marks REQUIRED
present), a task with data, file and structured parts, and each event of a stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from a2a_client import V1, rpc, shared_gateway
from conftest import GatewayProcess, api_key

SCHEMA = Path(__file__).parent / "schemas" / "a2a-v1.0.json"
BASE = "https://a2a.schema.invalid/"  # where the bundle's relative $refs (lf.a2a.v1.<Name>.jsonschema.json) resolve
CARD_REQUIRED = {  # AgentCard's fields marked (google.api.field_behavior) = REQUIRED in a2a.proto v1.0
    "name",
    "description",
    "supportedInterfaces",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
}


def _validator(definition: str) -> Draft202012Validator:
    """A validator for one definition of the bundle, its $refs to the others resolved."""
    definitions: dict[str, Any] = json.loads(SCHEMA.read_text())["definitions"]

    def uri(name: str) -> str:
        kind = "google.protobuf" if name in ("Struct", "Timestamp", "Value") else "lf.a2a.v1"
        return f"{BASE}{kind}.{name.replace(' ', '')}.jsonschema.json"

    registry: Registry = Registry().with_resources(
        (uri(name), Resource.from_contents({**schema, "$id": uri(name)})) for name, schema in definitions.items()
    )
    root = {**definitions[definition], "$id": uri(definition)}
    return Draft202012Validator(root, registry=registry)


def _problems(definition: str, instance: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator(definition).iter_errors(instance)]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from shared_gateway(tmp_path_factory, "a2a-schema")


def test_the_v1_card_validates_against_the_v1_schema_with_every_required_field(gw: GatewayProcess) -> None:
    for path in ("/.well-known/agent-card.json", "/p/default/.well-known/agent-card.json"):
        card = httpx.get(f"{gw.url}{path}", trust_env=False).json()
        assert _problems("Agent Card", card) == [], card
        assert set(card) >= CARD_REQUIRED, CARD_REQUIRED - set(card)
        assert card["skills"] and card["supportedInterfaces"] and card["defaultInputModes"], card


def test_the_0_3_card_is_not_a_v1_card(gw: GatewayProcess) -> None:
    """The check above can fail: the 0.3 shape, served at the legacy path, is refused by the 1.0 schema."""
    r = httpx.get(f"{gw.url}/.well-known/agent.json", trust_env=False)
    assert r.status_code == 200 and r.json()["protocolVersion"] == "0.3", r.text
    assert any("'url'" in p and "'protocolVersion'" in p for p in _problems("Agent Card", r.json())), r.text


def test_a_task_with_every_kind_of_part_validates_against_the_v1_schema(gw: GatewayProcess) -> None:
    parts = [
        {"text": "all kinds"},
        {"data": {"k": [1, 2]}},
        {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
        {"url": "https://example.invalid/a.pdf", "filename": "a.pdf", "mediaType": "application/pdf"},
    ]
    message = {"messageId": "m-schema", "role": "ROLE_USER", "parts": parts}
    task = rpc(gw, "SendMessage", {"message": message}, headers=V1)["result"]["task"]
    assert _problems("Task", task) == [], task
    structured = {"messageId": "m-schema-json", "role": "ROLE_USER", "parts": [{"text": '/json {"a": 1}'}]}
    answer = rpc(gw, "SendMessage", {"message": structured}, headers=V1)["result"]
    assert _problems("Send Message Response", answer) == [], answer


def test_each_event_of_a_stream_validates_against_the_v1_schema(gw: GatewayProcess) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m-schema-stream", "role": "ROLE_USER", "parts": [{"text": "events"}]}},
    }
    headers = {"Authorization": f"Bearer {api_key(gw.root)}", **V1}
    events = []
    with httpx.stream("POST", f"{gw.url}/a2a/jsonrpc", json=body, headers=headers, timeout=30) as r:
        events = [json.loads(line[5:])["result"] for line in r.iter_lines() if line.startswith("data:")]
    assert len(events) >= 3, events
    for event in events:
        assert _problems("Stream Response", event) == [], event
