"""`make demo`: a tutorial that runs itself. Every step prints the command it runs as you would type it
(the messaging rules too: `profile allow`, no file is edited behind your back) and the gateways it starts;
nothing happens that is not shown.

Offline (the echo engine), in two fresh homes under one temporary folder, removed at the end unless
--keep. Works wherever Python does (each command is `python -m backchannel` of this interpreter). Every
gateway it starts is stopped, also on Ctrl-C or a failed step; a failed step exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from backchannel import shell
from backchannel.home import config, profiles

BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


class StepFailed(Exception):
    """A command of the demo exited with an unexpected code, or a gateway did not come up."""


class Demo:
    """The homes of the demo, by label, and the gateways it started (stopped by `stop_gateways`)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.homes = {"home": base / "home", "spark": base / "spark"}
        self.gateways: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        # Each home's gateway port, written into its config.yaml by `init --port`: `backchannel gateway` alone
        # starts it there, at the URL its peer knows it by (now, and again on a kept home).
        self.ports = {label: _free_port() for label in self.homes}

    def env(self, label: str) -> dict[str, str]:
        return {**os.environ, "BACKCHANNEL_HOME": str(self.homes[label])}

    def run(self, label: str, *args: str, stdin: str | None = None, note: str = "") -> str:
        """Print `[label] $ backchannel ARGS`, run it on that home, print what it printed; its stdout."""
        typed = shell.command("backchannel", *args)
        print(f"{DIM}[{label}]{RESET} {BOLD}$ {typed}{RESET}{f'   # {note}' if note else ''}")
        proc = subprocess.run(
            [sys.executable, "-m", "backchannel", *args],
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=self.env(label),
            timeout=120,
        )
        for line in (proc.stdout + proc.stderr).rstrip().splitlines():
            print(f"  {line}")
        if proc.returncode in (130, -2):  # Ctrl-C reached the command first: the demo stops as for its own
            raise KeyboardInterrupt
        if proc.returncode != 0:
            raise StepFailed(f"`{shell.command('backchannel', *args)}` on {label} exited {proc.returncode}")
        return proc.stdout

    def start_gateway(self, label: str) -> int:
        port = self.ports[label]
        args = ["gateway"]
        log = self.base / f"{label}-gateway.log"
        print(f"{DIM}[{label}]{RESET} {BOLD}$ {shell.command('backchannel', *args)}{RESET}   # in the background")
        print(f"  home {self.homes[label]}, listening on http://127.0.0.1:{port}, log {log}")
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "backchannel", *args], env=self.env(label), stdout=out, stderr=subprocess.STDOUT
            )
        self.gateways[label] = (proc, port)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StepFailed(f"the gateway of {label} exited {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                    return port
            except httpx.HTTPError:
                time.sleep(0.1)
        raise StepFailed(f"the gateway of {label} did not answer /health within 30 s:\n{log.read_text()}")

    def describe(self, label: str) -> str:
        """A home as it is now: its path, profiles and peers."""
        root = self.homes[label]
        if not config.config_path(root).exists():
            return f"{root}  (not created)"
        peers = ", ".join(sorted(config.load_gateway_config(root).peers)) or "none"
        return f"{root}  (profiles {', '.join(profiles.list_profiles(root))}; peers {peers})"

    def stop_gateways(self) -> None:
        for label, (proc, _) in self.gateways.items():
            if proc.poll() is None:
                if label not in self.homes:  # a Hermes gateway: SIGTERM stops it
                    proc.terminate()
                else:
                    with contextlib.suppress(StepFailed, KeyboardInterrupt, subprocess.TimeoutExpired):
                        # As on SIGTERM, on every platform: running turns finish within its grace, then it exits.
                        self.run(label, "gateway", "stop")
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            print(f"stopped the gateway of {label} (pid {proc.pid}, exit {proc.returncode})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_home(home: Path, command: str) -> str:
    """A command with BACKCHANNEL_HOME set, as this platform's shell takes it."""
    if sys.platform == "win32":
        return f'set "BACKCHANNEL_HOME={home}" && {command}'
    return f"BACKCHANNEL_HOME={shlex.quote(str(home))} {command}"


def step(title: str) -> None:
    print(f"\n{BOLD}## {title}{RESET}", flush=True)


def tutorial(demo: Demo) -> None:
    step("A home holds the agents (profiles), their sessions and its API key")
    demo.run("home", "init", "--port", str(demo.ports["home"]), note="where its gateway will listen")
    demo.run("home", "profile", "create", "research")
    demo.run("home", "profile", "create", "builds")

    step("Talk to research; the session remembers")
    demo.run("home", "chat", "-p", "research", "-q", "hello, I like tea")
    demo.run("home", "chat", "-p", "research", "-c", "-q", "what did I say before?", note="-c: the same session")

    step("research asks builds: refused, because a profile may message nobody until allowed")
    demo.run("home", "send", "research", "/send builds is the build green?", note="the echo engine calls the tool")
    demo.run("home", "profile", "allow", "research", "builds", note="agent.session_messaging.allow in its config.yaml")
    demo.run("home", "send", "research", "/send builds is the build green?")
    demo.run("home", "ledger", "research", "builds")

    step("Two gateways (on one machine here; on two in real life); the CLI finds its home's gateway")
    demo.run("spark", "init", "--port", str(demo.ports["spark"]))
    home_port = demo.start_gateway("home")
    spark_port = demo.start_gateway("spark")

    step("A message held for your approval: a hold rule, then `held`, `approve`; every run can be looked at")
    demo.run("home", "profile", "hold", "builds", "research/*", note="research's messages to builds wait for you")
    demo.run("home", "send", "research", "/send builds may I restart the build?")
    held = json.loads(demo.run("home", "held", "--json", note="what waits, oldest first"))
    demo.run("home", "approve", held[0]["run_id"], note="queued now: builds answers, and research hears")
    demo.run("home", "runs", "wait-idle", "builds", "--timeout", "60", note="until builds has answered")
    demo.run("home", "runs", "list", "-p", "builds", note="each run: its state, sender and words")
    demo.run("home", "profile", "hold", "builds", "research/*", "--remove")

    step("A mention: @session:ADDRESS in what you say to one agent asks another first, and adds its reply")
    demo.run("home", "chat", "-p", "research", "-q", "@session:builds is the build green? then tell me what it said")

    step("A key each way: each makes a key for the other (printed once), given to `peer add` there (on its stdin)")
    key = key_at_spark = demo.run(
        "spark", "key", "create", "home", "--profile", "*", note="home's messages at spark: peer:home/…"
    )
    demo.run(
        "home",
        "peer",
        "add",
        "spark",
        "--url",
        f"http://127.0.0.1:{spark_port}",
        stdin=key.strip(),
        note="key on stdin",
    )
    key = demo.run("home", "key", "create", "spark", note="spark's messages at home: peer:spark/…, default only")
    demo.run(
        "spark", "peer", "add", "home", "--url", f"http://127.0.0.1:{home_port}", stdin=key.strip(), note="key on stdin"
    )
    demo.run("spark", "key", "list", note="the key's name, profiles and last use: never the key")

    step("A person on home messages spark's agent; then research does, under its allowlist")
    demo.run("home", "peer", "dm", "spark", "disk status?")
    demo.run("home", "profile", "allow", "research", "peer:spark", note="the running gateway follows the change")
    demo.run("home", "send", "research", "/peer spark what is the uptime?")
    demo.run("spark", "ledger", note="what arrived at spark, under the name spark gave home")

    step("spark's agent as an A2A agent: `peer add` finds its agent card, and `peer dm` goes over A2A JSON-RPC")
    demo.run(
        "home",
        "peer",
        "add",
        "spark-a2a",
        "--url",
        f"http://127.0.0.1:{spark_port}/.well-known/agent-card.json",
        "--no-key-back",
        stdin=key_at_spark.strip(),
        note="the same key: the card names the JSON-RPC endpoint",
    )
    demo.run("home", "peer", "dm", "spark-a2a", "disk status, over A2A?")

    step("A team: a group send reaches every member (an outcome each); in a room you and the agents talk in turn")
    demo.run("home", "group", "create", "team", "research", "builds", "peer:spark", note="groups: in its config.yaml")
    demo.run("home", "send", "group:team", "stand-up: what are you on?")
    members = ("--member", "research", "--member", "builds", "--member", "peer:spark")
    demo.run("home", "room", "create", "standup", *members)
    demo.run("home", "room", "say", "standup", "what is left for the release?", note="each answers in turn")
    demo.run("home", "room", "show", "standup", note="the transcript, kept in the store")

    step("The same in a browser: the web view of home's gateway")
    print(f"  web view: http://127.0.0.1:{home_port}/   (log in with the key `backchannel key show` prints on home)")
    print("  overview, sessions, runs live, the ledger and each exchange; it stops with the demo's gateways")
    print("  (with --keep: `backchannel gateway` on that home serves it again, at the same address)")


HERMES_PYTHON = Path(__file__).resolve().parent.parent / ".venv-hermes" / "bin" / "python"
HERMES_KEY = "demo-hermes-api-key-0123456789"


def hermes_sessions(demo: Demo) -> None:
    """Optional: two Hermes Agent gateways (from .venv-hermes, which `make hermes` makes), one Hermes session asking the
    other through Backchannel. Hermes needs a real model: an OpenAI-compatible endpoint named by
    BACKCHANNEL_DEMO_MODEL_URL (and BACKCHANNEL_DEMO_MODEL); without one this part is a one-line note."""
    model_url, model = os.environ.get("BACKCHANNEL_DEMO_MODEL_URL"), os.environ.get("BACKCHANNEL_DEMO_MODEL", "")
    if not HERMES_PYTHON.exists():
        print("\n(Hermes sessions through Backchannel: `make hermes` installs Hermes Agent into .venv-hermes.)")
        return
    if not model_url:
        print("\n(Hermes sessions through Backchannel: set BACKCHANNEL_DEMO_MODEL_URL to an OpenAI-compatible model.)")
        return
    step("Hermes sessions message each other through Backchannel: one `hermes connect` per Hermes home, one allow rule")
    for name in ("hermes-research", "hermes-builds"):
        hermes_port = _free_port()
        home = demo.base / name
        home.mkdir()
        # The Hermes home as its person set it up: a model, a persona, the API server on (Backchannel drives its
        # turns through it). `hermes connect` adds the rest: its own key, Backchannel's URL, the plugin enabled.
        settings = {"model": {"provider": "custom", "default": model, "base_url": model_url}}
        (home / "config.yaml").write_text(yaml.safe_dump(settings))
        (home / ".env").write_text(
            f"API_SERVER_ENABLED=true\nAPI_SERVER_KEY={HERMES_KEY}\nAPI_SERVER_PORT={hermes_port}\n"
        )
        (home / "SOUL.md").write_text(f"You are {name}.\n")
        print(f"{DIM}[{name}]{RESET} a Hermes home: {home} (its .env turns its API server on at port {hermes_port})")
        demo.run("home", "hermes", "connect", name, "--hermes-home", str(home))
        env = {**os.environ, "HERMES_HOME": str(home)}
        print(f"{DIM}[{name}]{RESET} {BOLD}$ HERMES_HOME={home} hermes gateway run{RESET}")
        log = (demo.base / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [str(HERMES_PYTHON), "-m", "hermes_cli.main", "gateway", "run"], env=env, stdout=log, stderr=log
        )
        demo.gateways[name] = (proc, hermes_port)
        _wait_for(f"http://127.0.0.1:{hermes_port}/health", name)
    demo.run("home", "profile", "allow", "hermes-research", "hermes-builds")
    demo.run("home", "send", "hermes-research", "Use send_to_session to ask hermes-builds for a one-word status.")
    demo.run("home", "ledger", "hermes-research", "hermes-builds")


def _wait_for(url: str, label: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise StepFailed(f"{label} did not answer {url} within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the two homes (and say how to start their gateways again, and how to remove them)",
    )
    keep = parser.parse_args().keep
    base = Path(tempfile.mkdtemp(prefix="backchannel-demo-"))
    demo = Demo(base)
    print("The demo's two homes (each command runs with BACKCHANNEL_HOME set to the one in brackets):")
    for label, path in demo.homes.items():
        print(f"  [{label}] {path}")
    print(f"`backchannel` is run as `{sys.executable} -m backchannel`, the same command.")
    code = 0
    try:
        tutorial(demo)
        hermes_sessions(demo)
        if sys.stdin.isatty():  # a person at the terminal: the gateways stay up while they look around the web view
            with contextlib.suppress(EOFError):
                input(f"\n{BOLD}The gateways are still up: press Enter to stop them.{RESET} ")
    except StepFailed as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        code = 130
    finally:
        demo.stop_gateways()
        summary = [f"{label:<6} {demo.describe(label)}" for label in demo.homes]
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    step("Summary")
    fate = "kept" if keep else "removed"
    for line in summary:
        print(f"{line}: {fate}")
    if keep:
        remove = f'rmdir /s /q "{base}"' if sys.platform == "win32" else f"rm -rf {shlex.quote(str(base))}"
        print(f"Both are in {base}. Look around with BACKCHANNEL_HOME set to one; start their gateways again with:")
        for label, path in demo.homes.items():
            if config.config_path(path).exists():
                print(f"  {_with_home(path, 'backchannel gateway')}   # {label}, at its port as before")
        print(f"Remove them with: {remove}")
    return code


if __name__ == "__main__":
    sys.exit(main())
