"""`make bench-hermes`: one turn on the openai engine through our gateway against the same turn through a
Hermes Agent 0.19 gateway's /api/sessions/{id}/chat, on one scripted OpenAI-compatible model (instant).

Each figure is a median over interleaved turns; the scripted model's own time is measured the same way
(a direct POST to it) and subtracted, so the ratio compares the two gateways' overhead per turn.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests"), str(ROOT / "tests" / "interop")]
from common import backchannel, median, new_home, start_gateway  # noqa: E402
from hermes_gateway import HERMES_PYTHON, HermesGateway  # noqa: E402

from scripted_model import ScriptedModel  # noqa: E402

KEY = "bench-hermes-key-0123456789"
TURNS = 40


def timed_post(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> float:
    started = time.perf_counter()
    r = client.post(url, json=body, headers=headers, timeout=120)
    r.raise_for_status()
    return time.perf_counter() - started


def main() -> None:
    if HERMES_PYTHON is None:
        sys.exit("no Hermes venv: run `make bench-hermes` (it installs hermes-agent==0.19.0 into .venv-hermes)")
    with ScriptedModel(lambda body: "ok") as model, HermesGateway(model.base_url, api_key=KEY) as hermes:
        home = new_home("bench-openai-")
        backchannel(
            home,
            "profile",
            "create",
            "coder",
            "--engine",
            "openai",
            "--base-url",
            model.base_url,
            "--model",
            "scripted",
        )
        ours = start_gateway(home)
        try:
            with httpx.Client() as c:
                h_sid = c.post(f"{hermes.url}/api/sessions", json={"title": "bench"}, headers=hermes.headers).json()[
                    "session"
                ]["id"]
                o_sid = c.post(
                    f"{ours.url}/p/coder/api/sessions", json={"title": "bench"}, headers=ours.headers
                ).json()["session"]["id"]
                model_url = f"{model.base_url}/chat/completions"
                probe = {"model": "scripted", "messages": [{"role": "user", "content": "x"}]}
                for _ in range(3):  # warm both (Hermes builds its agent on the first turn)
                    timed_post(c, f"{hermes.url}/api/sessions/{h_sid}/chat", {"message": "warm"}, hermes.headers)
                    timed_post(c, f"{ours.url}/p/coder/api/sessions/{o_sid}/chat", {"message": "warm"}, ours.headers)
                h, o, m = [], [], []
                for i in range(TURNS):
                    h.append(
                        timed_post(c, f"{hermes.url}/api/sessions/{h_sid}/chat", {"message": f"q{i}"}, hermes.headers)
                    )
                    o.append(
                        timed_post(
                            c,
                            f"{ours.url}/p/coder/api/sessions/{o_sid}/chat",
                            {"message": f"q{i}"},
                            {**ours.headers, "Idempotency-Key": f"b{i}"},
                        )
                    )
                    m.append(timed_post(c, model_url, probe, {}))
        finally:
            ours.stop()
    calls = len(model.requests) / (2 * (TURNS + 3) + TURNS)  # model requests per measured unit, for the record
    result = {
        "hermes_turn_p50_ms": median(h) * 1e3,
        "backchannel_turn_p50_ms": median(o) * 1e3,
        "model_call_p50_ms": median(m) * 1e3,
        "hermes_overhead_ms": (median(h) - median(m)) * 1e3,
        "backchannel_overhead_ms": (median(o) - median(m)) * 1e3,
        "model_requests_per_turn_approx": round(calls, 2),
    }
    result["overhead_ratio"] = result["hermes_overhead_ms"] / max(result["backchannel_overhead_ms"], 1e-6)
    out = ROOT / "bench" / "results" / f"bench-hermes-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    for key, value in result.items():
        print(f"{key:34} {value:10.2f}")
    print(f"target: overhead ratio >= 100x\nwritten to {out}")


if __name__ == "__main__":
    main()
