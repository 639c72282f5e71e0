"""The HTTP API fuzzed from its own /openapi.json (schemathesis, in-process over ASGI).

Contract: DESIGN.md section 5 ("Bad input": every malformed request gets HTTP 4xx with the error envelope;
a 5xx is a bug; every route but /health needs the key) and section 7 (one error envelope
`{"error": {"message", "type", "code"}}`; the app serves its OpenAPI document at /openapi.json).

Every operation of the document is fuzzed with the key, with data that fits the schema (positive,
also aimed at a real session and run) and data that does not (negative), and without the key.
Each test collects every distinct failing case and reports them all, with a curl line to replay it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.python import asgi  # noqa: E402

from backchannel.api.server import build  # noqa: E402
from backchannel.api.surface import openapi_document  # noqa: E402
from backchannel.home import config  # noqa: E402
from conftest import api_key, run_cli  # noqa: E402

pytestmark = pytest.mark.faults

MAX_EXAMPLES = int(os.environ.get("BACKCHANNEL_FUZZ_EXAMPLES", "30"))  # per operation and mode; more for a deep run
CALL_TIMEOUT = 20.0  # seconds; a request that takes longer hangs (the longest wait a stream may take is 15 s)
MAX_BODY_BYTES = 8192
HTTP_WAIT_SECONDS = 1  # gateway.http_wait_seconds: the chat routes' wait when the request names none
# The public routes are those the document marks `security: []` (liveness, and the document itself).
UNAUTHENTICATED = {
    path for path, item in openapi_document()["paths"].items() for op in item.values() if op.get("security") == []
}

OPERATIONS = sorted(
    (method.upper(), path) for path, item in openapi_document()["paths"].items() for method in item if method != "$ref"
)
PROTECTED_OPERATIONS = [(m, p) for m, p in OPERATIONS if p not in UNAUTHENTICATED]
# (mode, operation): negative cases need something to break, and GET /health takes no input at all.
KEYED = [
    (mode, m, p)
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    for m, p in OPERATIONS
    if mode is GenerationMode.POSITIVE or p not in UNAUTHENTICATED
]


@dataclass
class Home:
    root: Path
    key: str
    known: dict[str, str] = field(default_factory=dict)


@dataclass
class Fuzz:
    home: Home
    schema: Any

    @property
    def key(self) -> str:
        return self.home.key

    @property
    def known(self) -> dict[str, str]:
        return self.home.known


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """One home for the module: a second profile, a session and a completed run to aim at."""
    root = tmp_path_factory.mktemp("fuzz") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BACKCHANNEL_HOME", str(root))
        assert run_cli("init").exit_code == 0
        assert run_cli("profile", "create", "research").exit_code == 0
        assert run_cli("group", "create", "team", "research").exit_code == 0
        cfg = config.config_path(root)
        data = config.load_yaml(cfg)
        # No generated request may hold the run for the default 600 s; a small body limit gets exercised too.
        data["gateway"].update(http_wait_seconds=HTTP_WAIT_SECONDS, max_body_bytes=MAX_BODY_BYTES)
        config.write_yaml(cfg, data)
        chat = run_cli("chat", "-q", "a message to find", "--json")
        assert chat.exit_code == 0, chat.stderr
        ran = json.loads(chat.stdout)
        assert ran["state"] == "completed", ran
        # The turn asks at once; the send's wait (no gateway runs: the CLI serves the turn itself) only needs to
        # outlast that, not the default 120 s a person would wait for an answer.
        asking = run_cli("send", "research", "/ask a question to aim at", "--json", "--wait", "10")
        assert asking.exit_code == 0 and json.loads(asking.stdout)["state"] == "input_required", asking.stdout
        asked = json.loads(run_cli("ask", "list", "--json").stdout)
        assert len(asked) == 1, asked
        yield Home(
            root=root,
            key=api_key(root),
            known={
                "profile": "default",
                "session_id": ran["session_id"],
                "run_id": ran["run_id"],
                "tool": "list_sessions",
                "name": "team",
                "round": "round_0",  # none such: a round is opened by a message said in a room
                "question_id": asked[0]["id"],  # open: the first positive answer closes it, and later ones conflict
            },
        )


@pytest.fixture
def fuzz(fuzz_home: Home) -> Iterator[Fuzz]:
    """A fresh app per test: schemathesis' pytest plugin ends every ASGI lifespan (our runtime) at teardown."""
    app, _runtime = build(fuzz_home.root, grace=1.0)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)  # starts the app's lifespan
    try:
        yield Fuzz(home=fuzz_home, schema=schema)
    finally:
        asgi.shutdown_lifespans()


def path_names(path: str) -> list[str]:
    return re.findall(r"{(\w+)}", path)


def envelope_problem(response: Any) -> str | None:
    """Why this response breaks the error contract, or None."""
    if response.status_code >= 500:
        return f"server error {response.status_code}"
    if response.status_code < 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        return f"{response.status_code} with a body that is not JSON"
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return f"{response.status_code} without the error envelope"
    missing = [k for k in ("message", "type", "code") if not isinstance(error.get(k), str) or not error.get(k)]
    if missing:
        return f"{response.status_code} envelope lacks {', '.join(missing)}"
    return None


def is_no_such_route(response: Any) -> bool:
    """The router's own 404: a generated path parameter ('' or one with a '/') made a path with no route."""
    if response.status_code != 404:
        return False
    with contextlib.suppress(ValueError, AttributeError):
        error = json.loads(response.content)["error"]
        return bool(error["code"] == "not_found" and error["message"].startswith("no such route"))
    return False


class Findings:
    """Distinct failing cases (one per kind of problem), each with what was sent and what came back."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.calls = 0

    def add(self, problem: str, case: Any, response: Any | None, headers: dict[str, str]) -> None:
        if problem in self.seen:
            return
        sent = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        try:
            replay = case.as_curl_command(headers=sent)
        except Exception as exc:  # a case curl cannot express is still a finding
            replay = f"(no curl: {exc!r}) {case.method} {case.formatted_path} body={case.body!r}"
        got = "" if response is None else response.content[:300].decode(errors="replace")
        self.seen[problem] = f"{problem}\n    request: {replay}\n    response: {got}"

    def report(self) -> str:
        return f"{len(self.seen)} distinct failing cases in {self.calls} calls:\n" + "\n".join(self.seen.values())


def run_fuzz(strategy: Any, check: Any, headers: dict[str, str], max_examples: int = MAX_EXAMPLES) -> Findings:
    findings = Findings()

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same cases on every run: a failure here is reproducible
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def fuzz_one(case: Any) -> None:
        findings.calls += 1
        try:
            response = case.call(headers=headers, timeout=CALL_TIMEOUT)
        except Exception as exc:  # a hang (read timeout) or an exception out of the app
            findings.add(f"{type(exc).__name__}: {str(exc)[:120]}", case, None, headers)
            return
        problem = check(response)
        if problem:
            findings.add(f"{case.method} {case.operation.path}: {problem}", case, response, headers)

    fuzz_one()
    return findings


@pytest.mark.parametrize(("mode", "method", "path"), KEYED, ids=[f"{mode} {m} {p}" for mode, m, p in KEYED])
def test_fuzz_with_the_key_never_5xx_and_every_error_in_the_envelope(
    fuzz: Fuzz, mode: GenerationMode, method: str, path: str
) -> None:
    operation = fuzz.schema[path][method]
    strategy = operation.as_strategy(generation_mode=mode)
    names = path_names(path)
    if names and mode is GenerationMode.POSITIVE:
        # Half of the cases aim at what exists, so they get past the 404s into the handlers.
        aimed = operation.as_strategy(generation_mode=mode, path_parameters={n: fuzz.known[n] for n in names})
        strategy = st.one_of(strategy, aimed)
    findings = run_fuzz(strategy, envelope_problem, {"Authorization": f"Bearer {fuzz.key}"})
    assert not findings.seen, findings.report()


@pytest.mark.parametrize(("method", "path"), PROTECTED_OPERATIONS, ids=[f"{m} {p}" for m, p in PROTECTED_OPERATIONS])
def test_fuzz_without_the_key_is_always_401_in_the_envelope(fuzz: Fuzz, method: str, path: str) -> None:
    operation = fuzz.schema[path][method]
    names = path_names(path)
    strategy = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
    if names:
        strategy = st.one_of(strategy, operation.as_strategy(path_parameters={n: fuzz.known[n] for n in names}))

    def check(response: Any) -> str | None:
        problem = envelope_problem(response)
        if problem:
            return problem
        if is_no_such_route(response):
            return None
        if response.status_code != 401:
            return f"{response.status_code} without the key (expected 401)"
        if json.loads(response.content)["error"]["code"] != "invalid_api_key":
            return "401 with a code other than invalid_api_key"
        return None

    for headers in ({}, {"Authorization": "Bearer wrong-key-of-some-length"}):
        findings = run_fuzz(strategy, check, headers, max_examples=MAX_EXAMPLES // 2)
        assert not findings.seen, findings.report()


def test_health_and_openapi_need_no_key(fuzz: Fuzz) -> None:
    client = asgi.get_client(fuzz.schema.app)
    assert {"/health", "/v1/health", "/p/{profile}/health", "/openapi.json"} <= UNAUTHENTICATED
    for path in ("/health", "/v1/health", "/p/default/health", "/openapi.json"):
        response = client.get(path)
        assert response.status_code == 200, (path, response.text)
        assert isinstance(response.json(), dict)
    assert client.get("/openapi.json").json()["paths"].keys() == openapi_document()["paths"].keys()


def test_stream_replay_of_a_run_finished_before_this_process_answers_at_once(fuzz_home: Home) -> None:
    """Found by the fuzz: chat/stream replaying a run whose events this process never saw (it finished before
    a restart) sat silent for min(15, wait) seconds before sending the outcome it already had in the store."""
    headers = {"Authorization": f"Bearer {fuzz_home.key}", "Idempotency-Key": "k-stream-replay"}
    body = {"message": "replay me on a stream"}
    first_app, _ = build(fuzz_home.root, grace=1.0)
    with asgi.get_client(first_app) as client:
        sid = fuzz_home.known["session_id"]
        r = client.post(f"/api/sessions/{sid}/chat", json=body, headers=headers, timeout=10)
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
    asgi.shutdown_lifespans()

    second_app, _ = build(fuzz_home.root, grace=1.0)  # a restarted gateway: an empty event hub
    with asgi.get_client(second_app) as client:
        started = time.monotonic()
        r = client.post(
            f"/api/sessions/{sid}/chat/stream",
            json=body,
            headers={**headers, "X-Hermes-Wait-Seconds": "60"},
            timeout=CALL_TIMEOUT,
        )
        took = time.monotonic() - started
    asgi.shutdown_lifespans()
    assert r.status_code == 200, r.text
    assert run_id in r.text and "assistant.completed" in r.text, r.text
    assert took < 3, f"the replayed stream took {took:.1f}s to send an outcome already in the store"
