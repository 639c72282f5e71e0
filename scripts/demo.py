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


def run(*args: str, input: str | None = None, check: bool = True, env: dict[str, str] | None = None) -> str:
    where = "" if env is None else f"{DIM}[on {Path(env['BACKCHANNEL_HOME']).name}]{RESET} "
    print(f"{where}{DIM}$ backchannel {' '.join(shlex.quote(a) for a in args)}{RESET}", flush=True)
    proc = subprocess.run(["backchannel", *args], input=input, capture_output=True, text=True, env=env or ENV)
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


def start_gateway(home: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """Give the home a free port and start its gateway; returns the process and its URL."""
    port = free_port()
    cfg = (home / "config.yaml").read_text().replace("port: 8377", f"port: {port}")
    (home / "config.yaml").write_text(cfg)
    log = (home / "gateway.log").open("w")
    proc = subprocess.Popen(["backchannel", "gateway"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/health", timeout=0.5).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    return proc, base


def api_key(home: Path) -> str:
    return next(
        line.split("=", 1)[1] for line in (home / ".env").read_text().splitlines() if line.startswith("API_SERVER_KEY=")
    )


def main() -> None:
    print(f"Demo home: {HOME}")
    say("Create a home and a research agent with its own persona")
    run("init")
    soul = HOME / "research-soul.md"
    soul.write_text("# Research\n\nYou are Research. You dig up facts and cite them.\n")
    run("profile", "create", "research", "--soul", str(soul))
    run("profile", "list")

    say("Talk to it; the conversation persists across invocations")
    first = json.loads(
        run("chat", "-p", "research", "-q", "hello, remember that I like tea\n/remember likes tea", "--json")
    )
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
    gateway, base = start_gateway(HOME, ENV)
    spark_home = Path(tempfile.mkdtemp(prefix="backchannel-demo-spark-"))
    spark_env = {**os.environ, "BACKCHANNEL_HOME": str(spark_home)}
    spark: subprocess.Popen[bytes] | None = None
    try:
        run("chat", "-p", "research", "--resume", session, "-q", "now through the gateway")

        say("Over HTTP (the Hermes API-server dialect): a quick turn, then a slow one that answers with a receipt")
        auth = {"Authorization": f"Bearer {api_key(HOME)}"}
        bot = httpx.post(f"{base}/p/research/api/sessions", json={"title": "Bot Chat"}, headers=auth).json()
        bot_id = bot["session"]["id"]
        reply = httpx.post(
            f"{base}/p/research/api/sessions/{bot_id}/chat",
            json={"message": "quick question"},
            headers=auth,
            timeout=30,
        ).json()
        print(f"POST /p/research/api/sessions/{bot_id}/chat → {reply['message']['content']!r}")
        slow = httpx.post(
            f"{base}/p/research/api/sessions/{bot_id}/chat",
            json={"message": "/sleep 1.5\na long analysis"},
            headers={**auth, "X-Hermes-Wait-Seconds": "0.3"},
            timeout=30,
        )
        receipt = slow.json()
        print(
            f"HTTP {slow.status_code}: {receipt['object']} run {receipt['run_id']} status {receipt['status']}"
            f" — {receipt['detail']}"
        )
        while True:
            state = httpx.get(f"{base}/p/research/v1/runs/{receipt['run_id']}", headers=auth).json()
            if state["status"] not in ("queued", "running"):
                break
            time.sleep(0.2)
        print(f"GET /v1/runs/{receipt['run_id']} → {state['status']}: {state.get('output')!r}")

        say("A second gateway, 'spark' (another machine in real life): register each on the other")
        run("init", env=spark_env)
        spark, spark_url = start_gateway(spark_home, spark_env)
        run("peer", "add", "spark", "--url", spark_url, "--note", "the homelab gateway", input=api_key(spark_home))
        run("peer", "add", "home", "--url", base, input=api_key(HOME), env=spark_env)
        run("peer", "list")

        say("peer dm: a message into spark's Bot Chat, and its reply")
        run("peer", "dm", "spark", "disk status on the homelab?")

        say("peer run: long work starts at once; status --follow streams it to the end")
        started = json.loads(run("peer", "run", "spark", "/sleep 1\nanalyse the full log", "--json"))
        run("peer", "status", "spark", started["run_id"], "--follow")

        say("An agent asks another gateway's agent itself (send_to_peer), under its allowlist")
        cfg_path.write_text(cfg_path.read_text().replace("    - builds", "    - builds\n    - peer:spark"))
        run("send", "research", "/peer spark what is the uptime?")

        say("Both ledgers: what left this gateway and what arrived at spark")
        run("ledger", "peer:spark")
        run("ledger", env=spark_env)
    finally:
        for proc in (gateway, spark):
            if proc is not None:
                proc.terminate()
                proc.wait(15)
    say("The gateway logged each run's state changes")
    for line in (HOME / "gateway.log").read_text().splitlines():
        if " run " in line:
            print("  " + line.split(" backchannel.gateway ", 1)[-1])
    print(f"\nDone. Everything is in {HOME}")


if __name__ == "__main__":
    main()
