"""`make demo` (scripts/demo.py) as a person runs it: every step it promises is shown, it exits 0, its
gateways are stopped and its homes removed, or kept with --keep; Ctrl-C stops it the same way."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backchannel import procs
from backchannel.home import config
from conftest import interruptible

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "scripts" / "demo.py"

PROMISED = [
    "[home] $ backchannel init --port ",
    "[home] $ backchannel profile create research",
    "[home] $ backchannel chat -p research -q 'hello, I like tea'",
    "[home] $ backchannel send research '/send builds is the build green?'",
    '"result": "refused"',  # deny by default
    "[home] $ backchannel profile allow research builds",
    "research allow: builds",
    '"result": "delivered"',
    "[home] $ backchannel ledger research builds",
    "[spark] $ backchannel init --port ",
    "[home] $ backchannel gateway   # in the background",
    "[spark] $ backchannel gateway   # in the background",
    "[home] $ backchannel profile hold builds 'research/*'",
    '"result": "held"',
    "[home] $ backchannel approve run_",
    ": approved, queued",
    "[home] $ backchannel runs list -p builds",
    "completed  research/",
    "[home] $ backchannel chat -p research -q '@session:builds is the build green? then tell me what it said'",
    "[Replies to the mentions in this message: each from another agent, not your user]",
    "[spark] $ backchannel key create home --profile '*'",
    "[home] $ backchannel peer add spark --url http://127.0.0.1:",
    "[home] $ backchannel key create spark",
    "[spark] $ backchannel peer add home --url http://127.0.0.1:",
    "[spark] $ backchannel key list",
    "[home] $ backchannel peer dm spark 'disk status?'",
    "default (echo): disk status?",
    "[home] $ backchannel peer add spark-a2a --url http://127.0.0.1:",
    "is the A2A agent default",
    "[home] $ backchannel peer dm spark-a2a 'disk status, over A2A?'",
    "default (echo): disk status, over A2A?",
    "[home] $ backchannel profile allow research peer:spark",
    "research allow: builds, peer:spark",
    "[home] $ backchannel send research '/peer spark what is the uptime?'",
    "[spark] $ backchannel ledger",
    "peer:home/research",  # spark knows home by the name it gave it
    "[home] $ backchannel send group:team 'stand-up: what are you on?'",
    "reached 3/3",
    "[home] $ backchannel room say standup 'what is left for the release?'",
    "  [peer:spark]\n  default (echo):",
    "[home] $ backchannel room show standup",
    "  web view: http://127.0.0.1:",
]


def run_demo(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEMO), *args], cwd=ROOT, env=_env(tmp), capture_output=True, text=True, timeout=300
    )


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BACKCHANNEL_HOME"}
    return {**env, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp), "PYTHONUNBUFFERED": "1"}


def stopped_gateways(output: str) -> list[int]:
    """The pids the demo says it stopped, each checked gone."""
    found = re.findall(r"stopped the gateway of (home|spark) \(pid (\d+), exit (-?\d+)\)", output)
    assert sorted(label for label, _, _ in found) == ["home", "spark"], output
    pids = [int(pid) for _, pid, _ in found]
    assert not any(procs.alive(pid) for pid in pids), pids
    return pids


@pytest.mark.faults  # a whole demo run (about a minute): make faults, with the one below
def test_the_demo_shows_every_step_and_removes_its_homes(tmp_path: Path) -> None:
    done = run_demo(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for promised in PROMISED:
        assert promised in done.stdout, promised
    stopped_gateways(done.stdout)
    address = re.search(r"web view: (http://127\.0\.0\.1:(\d+)/)", done.stdout)
    assert (
        address is not None and f"init --port {address.group(2)}" in done.stdout.split("[spark] $ backchannel init")[0]
    )
    assert "edit " not in done.stdout  # every change is a command a person can type
    summary = done.stdout.rstrip().splitlines()[-2:]
    assert summary[0].startswith("home ") and summary[0].endswith("removed"), summary
    assert summary[1].startswith("spark ") and summary[1].endswith("removed"), summary
    assert list(tmp_path.iterdir()) == []  # both homes (and the gateways' logs) are gone


@pytest.mark.faults  # the demo's second whole run (and three more processes)
def test_with_keep_the_homes_stay_and_it_says_how_to_remove_them(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--keep")
    assert done.returncode == 0, done.stdout + done.stderr
    (base,) = tmp_path.iterdir()
    for label in ("home", "spark"):
        assert (base / label / "config.yaml").is_file()
        assert not (base / label / "gateway.json").exists()  # each gateway stopped cleanly, not killed
    assert f"rm -rf {base}" in done.stdout or f'rmdir /s /q "{base}"' in done.stdout
    assert done.stdout.count(": kept") == 2, done.stdout
    stopped_gateways(done.stdout)
    restart = re.findall(r"^  BACKCHANNEL_HOME=(\S+) backchannel gateway ", done.stdout, flags=re.MULTILINE)
    assert sorted(Path(h).name for h in restart) == ["home", "spark"], done.stdout

    # Started again as the hint says, each gateway is where its peer's URL points: a dm goes both ways.
    gateways = [_gateway(Path(h)) for h in restart]
    try:
        for home, peer in (("home", "spark"), ("spark", "home")):
            sent = subprocess.run(
                [sys.executable, "-m", "backchannel", "peer", "dm", peer, f"hello from {home}, again", "--json"],
                env={**_env(tmp_path), "BACKCHANNEL_HOME": str(base / home)},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert sent.returncode == 0, (sent.stdout, sent.stderr)
            assert json.loads(sent.stdout)["reply"] == f"default (echo): hello from {home}, again"
    finally:
        for proc in gateways:
            proc.terminate()
            proc.wait(20)


def _gateway(home: Path) -> subprocess.Popen[bytes]:
    """`backchannel gateway` on a kept home, at the port its config says, once /health answers there."""
    port = config.load_gateway_config(home).port
    proc = subprocess.Popen(
        [sys.executable, "-m", "backchannel", "gateway"],
        env={**os.environ, "BACKCHANNEL_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the gateway of {home} exited {proc.returncode}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the gateway of {home} did not come up at port {port}")


@pytest.mark.faults
@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_stops_the_gateways_removes_the_homes_and_exits_130(tmp_path: Path) -> None:
    proc = interruptible([sys.executable, str(DEMO)], cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "A key each way" in line:  # both gateways are up
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    output = "".join(seen) + rest
    assert proc.returncode == 130, output
    stopped_gateways(output)
    assert list(tmp_path.iterdir()) == []


def test_help_gives_the_whole_first_paragraph(tmp_path: Path) -> None:
    shown = subprocess.run(
        [sys.executable, str(DEMO), "--help"], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    described = " ".join(shown.stdout.split("options:")[0].split("\n\n", 1)[1].split())
    assert described.endswith("nothing happens that is not shown."), described
