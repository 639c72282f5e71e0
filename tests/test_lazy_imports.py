"""What a command loads: `--version` and the CLI's root nothing but click; a gateway not the MCP or A2A SDKs
until something asks for them (their own tests check that /mcp and A2A still answer), nor OpenTelemetry
unless the OTEL_* variables ask for traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import GatewayThread, run_cli

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
    "pygments",
)


def _listing(code: str) -> str:
    """`code`, then a last line of output naming every top-level package the interpreter holds."""
    loaded = "{m.split('.')[0] for m, module in sys.modules.items() if module is not None}"  # None: kept out
    return f"{code}\nimport json, sys\nprint(json.dumps(sorted({loaded})))"


def _loaded_after(code: str) -> set[str]:
    """The top-level packages of HEAVY that a fresh interpreter holds after running `code`."""
    out = subprocess.run([sys.executable, "-c", _listing(code)], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1])) & set(HEAVY)


def _command(*argv: str) -> str:
    """Code that runs `backchannel ARGV...` as the console script does, and goes on after its exit."""
    return (
        f"import sys\nsys.argv = ['backchannel', *{list(argv)!r}]\nfrom backchannel.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code"
    )


def test_the_cli_root_loads_no_sdk_server_or_model_library() -> None:
    assert _loaded_after("import backchannel.cli.app") == set()


def test_version_loads_nothing_but_click() -> None:
    assert _loaded_after(_command("--version")) == set()


def test_a_gateway_loads_neither_the_mcp_nor_the_a2a_sdk_at_start() -> None:
    loaded = _loaded_after("import backchannel.core.gateway, backchannel.api.app, backchannel.api.server")
    assert not loaded & {"mcp", "mcp_types", "a2a"}
    assert "opentelemetry" not in loaded  # tracing off (no OTEL_* variable asks for it): not even its API
    assert {"starlette", "uvicorn"} <= loaded  # what serving needs is there


def test_the_send_command_loads_no_core_or_sdk_before_it_runs_in_process() -> None:
    code = "import backchannel.cli.send_cmd, sys\nassert 'backchannel.core.gateway' not in sys.modules, 'the core'"
    assert not _loaded_after(code) & {"mcp", "mcp_types", "a2a", "jinja2", "uvicorn", "starlette"}


def test_a_send_answered_in_process_loads_its_one_client_and_no_sdk(initialised: Path) -> None:
    """No gateway runs: the echo agent answers in this process, through the gateway's own app and the same client
    as over the network; no SDK (MCP, A2A), template engine or other HTTP client is loaded for it."""
    code = f"{_command('send', 'default', 'hello')}\nassert 'backchannel.core.gateway' in sys.modules, 'in-process'"
    loaded = _loaded_after(code)
    assert not loaded & {"mcp", "mcp_types", "a2a", "jinja2", "aiohttp"}
    assert {"httpx", "starlette", "pydantic", "yaml"} <= loaded  # the one client, the app, the home's config


def test_the_commands_are_listed_without_importing_any() -> None:
    """`backchannel --help` and a shell's Tab on a command name show every command's summary, and load none of
    the command modules (nor anything heavy) for it."""
    probe = "\nassert not [m for m in sys.modules if m.endswith('_cmd')], sorted(m for m in sys.modules if 'cli.' in m)"
    assert _loaded_after(_command("--help") + probe) == set()
    complete = (
        "import os\nos.environ.update(_BACKCHANNEL_COMPLETE='bash_complete', COMP_WORDS='backchannel ', COMP_CWORD='1')"
    )
    assert _loaded_after(f"{complete}\n{_command()}{probe}") == set()


def test_each_listed_summary_is_the_first_paragraph_of_the_commands_own_help() -> None:
    import importlib

    from backchannel.cli.app import COMMANDS

    for name, (module, summary) in COMMANDS.items():
        command = getattr(importlib.import_module(f"backchannel.cli.{module}"), name)
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert summary == first, f"COMMANDS[{name!r}] says {summary!r}; `backchannel {name} --help` says {first!r}"


def test_a_commands_help_loads_no_config_model_core_or_sdk() -> None:
    """Each command's `--help` (and a shell's Tab on its options) reads no file: it loads neither the config's
    models (pydantic, YAML) nor the core, nor anything heavier."""
    from backchannel.cli.app import COMMANDS

    probe = "\nassert 'backchannel.core.gateway' not in sys.modules, 'the core'"
    for name in COMMANDS:
        loaded = _loaded_after(_command(name, "--help") + probe)
        assert loaded == set(), f"`backchannel {name} --help` loads {sorted(loaded)}"


def _through_the_gateway(*argv: str) -> dict[str, object]:
    """`backchannel ARGV... --json` in a fresh interpreter, which must have built no core, opened no store and
    loaded neither config.yaml's models (pydantic, YAML) nor any server or SDK: its JSON output."""
    probe = (
        "\nassert not [m for m in sys.modules if m.startswith(('backchannel.core', 'backchannel.store.db'))],"
        " sorted(m for m in sys.modules if m.startswith('backchannel.'))"
    )
    code = f"{_command(*argv, '--json')}{probe}"
    done = subprocess.run([sys.executable, "-c", _listing(code)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(json.loads(done.stdout.splitlines()[-1])) & set(HEAVY)
    assert "httpx" in loaded and not loaded & {"pydantic", "yaml", "uvicorn", "starlette", "mcp", "a2a", "jinja2"}
    assert "pygments" not in loaded  # nor httpx's own command-line client, which imports it
    said: dict[str, object] = json.loads("\n".join(done.stdout.splitlines()[:-1]))
    return said


def test_a_send_through_the_running_gateway_reads_no_config_and_builds_no_core(gateway: GatewayThread) -> None:
    """A gateway runs: it resolves the address (the Bot Chat is made there) and answers the message."""
    sent = _through_the_gateway("send", "default", "hello")
    assert sent["via"] == "gateway" and sent["result"] == "delivered" and sent["reply"] == "default (echo): hello"


def test_a_peer_dm_through_the_running_gateway_reads_no_config_and_builds_no_core(gateway: GatewayThread) -> None:
    """A gateway runs: it sends the person's message to the peer (here the gateway itself, under a key of its own)
    and keeps the exchange in its ledger."""
    made = run_cli("key", "create", "loop", "--profile", "*", "--json")
    assert made.exit_code == 0, made.stderr
    added = run_cli("peer", "add", "loop", "--url", gateway.url, "--key", json.loads(made.stdout)["key"])
    assert added.exit_code == 0, added.stderr
    sent = _through_the_gateway("peer", "dm", "loop", "hello")
    assert sent["result"] == "delivered" and sent["peer"] == "loop", sent
    assert "hello" in str(sent["reply"])
    ledger = run_cli("ledger", "--json")
    assert ledger.exit_code == 0 and "peer:loop" in ledger.stdout, ledger


def test_sessions_runs_and_the_ledger_read_through_the_running_gateway_build_no_core(gateway: GatewayThread) -> None:
    """A gateway runs: the person's reads of the home (sessions, runs, a run's record, the ledger) are its answers,
    and the command opens no store of its own."""
    sent = _through_the_gateway("send", "default", "hello")
    run_id = str(sent["run_id"])
    sessions = _through_the_gateway("sessions", "list")
    assert isinstance(sessions, list) and [s["profile"] for s in sessions] == ["default"], sessions
    shown = _through_the_gateway("sessions", "show", "default")
    assert isinstance(shown, dict) and shown["messages"][0]["content"] == "hello", shown
    runs = _through_the_gateway("runs", "list")
    assert isinstance(runs, list) and [r["run_id"] for r in runs] == [run_id], runs
    assert _through_the_gateway("runs", "show", run_id)["reply"] == "default (echo): hello"
    ledger = _through_the_gateway("ledger", "default")
    assert isinstance(ledger, list) and [e["run_id"] for e in ledger] == [run_id], ledger
def test_a_peer_run_read_and_stopped_through_the_running_gateway_builds_no_core(gateway: GatewayThread) -> None:
    """A gateway runs: it starts the run on the peer (here itself, under a key of its own), reads and stops it,
    and keeps the run in its ledger as the person's (human:cli), as a command in its own process did."""
    made = _through_the_gateway("key", "create", "loop", "--profile", "*")
    assert made["name"] == "loop" and str(made["key"]).startswith("bcpk_"), made
    added = run_cli("peer", "add", "loop", "--url", gateway.url, "--key", str(made["key"]))
    assert added.exit_code == 0, added.stderr
    started = _through_the_gateway("peer", "run", "loop", "/sleep 0.2\nhello", "--idempotency-key", "loop-1")
    assert started["peer"] == "loop" and started["idempotency_key"] == "loop-1" and started["run_id"], started
    run_id = str(started["run_id"])
    status = _through_the_gateway("peer", "status", "loop", run_id, "--follow")
    assert status["result"] == "delivered" and "hello" in str(status["output"]), status
    stopped = _through_the_gateway("peer", "stop", "loop", run_id)
    assert stopped["peer"] == "loop" and stopped["status"] == "completed", stopped
    ledger = json.loads(run_cli("ledger", "--json").stdout)
    sent = [e for e in ledger if e["kind"] == "peer" and e["target"] == "peer:loop"]
    assert len(sent) == 1 and sent[0]["sender"] == "human:cli", ledger
    assert sent[0]["outcome"] == "delivered" and "hello" in str(sent[0]["reply"]), sent  # settled by the status


def test_keys_and_rooms_through_the_running_gateway_build_no_core(gateway: GatewayThread) -> None:
    made = _through_the_gateway("key", "create", "spark")
    assert made["name"] == "spark" and made["profiles"] == ["default"] and made["key"], made
    rotated = _through_the_gateway("key", "rotate", "spark")
    assert rotated["key"] != made["key"], rotated
    assert "key" not in _through_the_gateway("key", "revoke", "spark")
    assert run_cli("room", "create", "standup", "--member", "default").exit_code == 0
    shown = _through_the_gateway("room", "show", "standup")
    assert shown["name"] == "standup" and shown["members"] == ["default"] and shown["lines"] == [], shown
