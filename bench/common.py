"""Shared pieces of the benchmarks: homes, gateway processes, timing statistics."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def backchannel(home: Path, *args: str, input: str | None = None) -> str:
    env = {**os.environ, "BACKCHANNEL_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "backchannel", *args], env=env, input=input, capture_output=True, text=True, check=True
    )
    return proc.stdout


def api_key(home: Path) -> str:
    return next(
        line.split("=", 1)[1] for line in (home / ".env").read_text().splitlines() if line.startswith("API_SERVER_KEY=")
    )


@dataclass
class Gateway:
    home: Path
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key(self.home)}"}

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def new_home(prefix: str = "bench-") -> Path:
    home = Path(tempfile.mkdtemp(prefix=f"backchannel-{prefix}"))
    backchannel(home, "init")
    return home


def start_gateway(home: Path, *, traced: bool = False, port: int | None = None) -> Gateway:
    """A gateway process on `home`; `traced`: with tracing on, its spans kept in memory (bench/traced_gateway.py);
    `port`: the port it listens on (default a free one)."""
    port = port or free_port()
    cfg = home / "config.yaml"
    settings = yaml.safe_load(cfg.read_text())
    settings["gateway"]["port"] = port  # a fresh port at each start (a home's gateway may be started again)
    # The idle-sessions measure makes 11,000 sessions in one profile: past the default cap of 10,000.
    settings["gateway"]["max_sessions_per_profile"] = 1_000_000
    cfg.write_text(yaml.safe_dump(settings, sort_keys=False))
    env = {**os.environ, "BACKCHANNEL_HOME": str(home)}
    log = (home / "gateway.log").open("ab")
    command = [str(Path(__file__).with_name("traced_gateway.py"))] if traced else ["-m", "backchannel", "gateway"]
    proc = subprocess.Popen([sys.executable, *command], env=env, stdout=log, stderr=subprocess.STDOUT)
    gw = Gateway(home, port, proc)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{gw.url}/health", timeout=0.5).status_code == 200:
                return gw
        except httpx.HTTPError:
            time.sleep(0.05)
    gw.stop()  # one that comes up later would outlive the benchmark
    raise RuntimeError(f"gateway did not start: {(home / 'gateway.log').read_text()}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median(values: list[float]) -> float:
    return statistics.median(values)
