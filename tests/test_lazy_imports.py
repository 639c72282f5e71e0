"""What a command loads: `--version` and the CLI's root nothing but click; a gateway not the MCP or A2A SDKs
until something asks for them (their own tests check that /mcp and A2A still answer), nor OpenTelemetry
unless the OTEL_* variables ask for traces."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "mcp",
    "mcp_types",
    "a2a",
    "jinja2",
    "uvicorn",
    "starlette",
    "httpx",
    "aiohttp",
    "pydantic",
    "yaml",
    "prometheus_client",
    "opentelemetry",
)


def _loaded_after(code: str) -> set[str]:
    """The top-level packages of HEAVY that a fresh interpreter holds after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1])) & set(HEAVY)


def test_the_cli_root_loads_no_sdk_server_or_model_library() -> None:
    assert _loaded_after("import backchannel.cli.app") == set()


def test_version_loads_nothing_but_click() -> None:
    code = (
        "import sys\nsys.argv = ['backchannel', '--version']\nfrom backchannel.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert _loaded_after(code) == set()


def test_a_gateway_loads_neither_the_mcp_nor_the_a2a_sdk_at_start() -> None:
    loaded = _loaded_after("import backchannel.core.gateway, backchannel.api.app, backchannel.api.server")
    assert not loaded & {"mcp", "mcp_types", "a2a"}
    assert "opentelemetry" not in loaded  # tracing off (no OTEL_* variable asks for it): not even its API
    assert {"starlette", "uvicorn"} <= loaded  # what serving needs is there


def test_the_send_command_loads_no_core_or_sdk_before_it_runs_in_process() -> None:
    code = "import backchannel.cli.send_cmd, sys\nassert 'backchannel.core.gateway' not in sys.modules, 'the core'"
    assert not _loaded_after(code) & {"mcp", "mcp_types", "a2a", "jinja2", "uvicorn", "starlette"}
