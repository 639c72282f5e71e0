"""`make demo`: agents at work on the offline echo engine, driven through the real CLI and HTTP API.

Runs in a fresh temporary home, so it never touches ~/.backchannel.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


def say(text: str) -> None:
    print(f"\n{BOLD}## {text}{RESET}", flush=True)


def run(*args: str, input: str | None = None, check: bool = True) -> str:
    print(f"{DIM}$ backchannel {' '.join(shlex.quote(a) for a in args)}{RESET}", flush=True)
    proc = subprocess.run(["backchannel", *args], input=input, capture_output=True, text=True, env=ENV)
    out = proc.stdout + (proc.stderr if proc.returncode else "")
    print(out.rstrip(), flush=True)
    if check and proc.returncode != 0:
        sys.exit(f"demo step failed with exit {proc.returncode}: {proc.stderr}")
    return proc.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


HOME = Path(tempfile.mkdtemp(prefix="backchannel-demo-"))
ENV = {**os.environ, "BACKCHANNEL_HOME": str(HOME)}


def main() -> None:
    print(f"Demo home: {HOME}")
    say("Create a home and a research agent with its own persona")
    run("init")
    soul = HOME / "research-soul.md"
    soul.write_text("# Research\n\nYou are Research. You dig up facts and cite them.\n")
    run("profile", "create", "research", "--soul", str(soul))
    run("profile", "list")

    say("Talk to it; the conversation persists across invocations")
    first = json.loads(run("chat", "-p", "research", "-q", "hello, remember that I like tea\n/remember likes tea", "--json"))
    session = first["session_id"]
    run("chat", "--resume", session, "-q", "what did I say before?")
    run("sessions", "show", session)
    print(f"MEMORY.md now holds: {(HOME / 'profiles/research/memories/MEMORY.md').read_text().strip()!r}")

    say("Agents message each other: research asks builds (deny by default)")
    run("profile", "create", "builds")
    run("send", "research", "/send builds is the build green?")
    print("Refused: research's allowlist is empty. Allow it in profiles/research/config.yaml:")
    cfg_path = HOME / "profiles/research/config.yaml"
    cfg_path.write_text(cfg_path.read_text().replace("allow: []", "allow:\n    - builds"))
    print("  agent.session_messaging.allow: [builds]")
    run("send", "research", "/send builds is the build green?")

    say("A person's @session: mention asks builds first, and research answers with the reply in hand")
    run("send", "research", "@session:builds which tests failed last night?")

    say("The ledger: who said what to whom, with states, refusals and hops")
    run("ledger", "research", "builds")

    say("Start a gateway; the CLI finds it and runs turns through it")
    port = free_port()
    cfg = (HOME / "config.yaml").read_text().replace("port: 8377", f"port: {port}")
    (HOME / "config.yaml").write_text(cfg)
    log = HOME / "gateway.log"
    gateway = subprocess.Popen(["backchannel", "gateway"], env=ENV, stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if httpx.get(f"{base}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        run("chat", "-p", "research", "--resume", session, "-q", "now through the gateway")

        say("Over HTTP (the Hermes API-server dialect): a quick turn, then a slow one that answers with a receipt")
        key = next(line.split("=", 1)[1] for line in (HOME / ".env").read_text().splitlines()
                   if line.startswith("API_SERVER_KEY="))
        auth = {"Authorization": f"Bearer {key}"}
        bot = httpx.post(f"{base}/p/research/api/sessions", json={"title": "Bot Chat"}, headers=auth).json()
        bot_id = bot["session"]["id"]
        reply = httpx.post(f"{base}/p/research/api/sessions/{bot_id}/chat", json={"message": "quick question"},
                           headers=auth, timeout=30).json()
        print(f"POST /p/research/api/sessions/{bot_id}/chat → {reply['message']['content']!r}")
        slow = httpx.post(f"{base}/p/research/api/sessions/{bot_id}/chat",
                          json={"message": "/sleep 1.5\na long analysis"},
                          headers={**auth, "X-Hermes-Wait-Seconds": "0.3"}, timeout=30)
        receipt = slow.json()
        print(f"HTTP {slow.status_code}: {receipt['object']} run {receipt['run_id']} status {receipt['status']}"
              f" — {receipt['detail']}")
        while True:
            state = httpx.get(f"{base}/p/research/v1/runs/{receipt['run_id']}", headers=auth).json()
            if state["status"] not in ("queued", "running"):
                break
            time.sleep(0.2)
        print(f"GET /v1/runs/{receipt['run_id']} → {state['status']}: {state.get('output')!r}")
    finally:
        gateway.terminate()
        gateway.wait(15)
    say("The gateway logged each run's state changes")
    for line in log.read_text().splitlines():
        if " run " in line:
            print("  " + line.split(" backchannel.gateway ", 1)[-1])
    print(f"\nDone. Everything is in {HOME}")


if __name__ == "__main__":
    main()
