"""`backchannel gateway install | uninstall | status`: the home's gateway as a service of the user's session, kept
running (restarted when it fails, started at logon) by the platform's own manager: systemd's user manager, launchd,
Task Scheduler. The definitions are `home.service`'s; this module writes them and asks the manager."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from ..errors import GatewayError, UsageError
from ..home import config, runtime
from ..home.config import write_atomic
from ..home.gateway_log import log_path
from ..home.service import Service, definition
from .connect import find_gateway
from .gateway_stop import stop_gateway
from .output import emit, examples, note

ANSWER_SECONDS = 20.0  # how long `install` waits for the started gateway to answer
SESSION_STATES = ("running", "degraded", "starting", "initializing", "maintenance")
JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object)."
)


def service_of(root: Path, platform: str | None = None) -> Service:
    """This home's service on `platform` (default: this machine's), running this interpreter."""
    user = f"{os.environ.get('USERDOMAIN', '')}\\{os.environ.get('USERNAME', '')}".strip("\\")
    return definition(
        root,
        platform=platform or sys.platform,
        python=sys.executable,
        user_home=Path.home(),
        default_home=Path.home() / ".backchannel",  # config.home() without BACKCHANNEL_HOME
        user=user if "\\" in user else os.environ.get("USERNAME", ""),
    )


def _run(*words: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A manager's command (found on PATH); GatewayError naming it and what it said when it fails and `check`."""
    program = shutil.which(words[0])
    if program is None:
        if not check:
            return subprocess.CompletedProcess(words, 127, "", f"{words[0]}: not found")
        raise GatewayError(f"`{words[0]}` is not on PATH: the service manager of this platform cannot be asked")
    done = subprocess.run(
        [program, *words[1:]], capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=120
    )
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
        raise GatewayError(f"`{' '.join(words)}` failed: {said}")
    return done


def systemd_session() -> str | None:
    """None when this session has a systemd user manager to ask; else why not."""
    if shutil.which("systemctl") is None:
        return "no systemctl on PATH (not a systemd system)"
    done = _run("systemctl", "--user", "is-system-running", check=False)
    state = done.stdout.strip()
    if state in SESSION_STATES:
        return None
    said = state or next(reversed(done.stderr.strip().splitlines()), f"exit {done.returncode}")
    return f"`systemctl --user` reaches no user manager ({said})"


def _uid() -> str:
    getuid = getattr(os, "getuid", None)  # POSIX only; launchd's domain is the user's
    return str(getuid()) if getuid is not None else "0"


def _installed(svc: Service) -> bool:
    if svc.platform == "win32" and shutil.which("schtasks") is not None:
        return _run("schtasks", "/Query", "/TN", svc.name, check=False).returncode == 0
    return svc.path.is_file()


def _write(svc: Service) -> None:
    svc.path.parent.mkdir(parents=True, exist_ok=True)
    if svc.platform == "win32":  # Task Scheduler reads its XML as UTF-16, as it exports it
        tmp = svc.path.with_name(svc.path.name + ".tmp")
        tmp.write_text(svc.text, encoding="utf-16")
        os.replace(tmp, svc.path)
    else:
        write_atomic(svc.path, svc.text, mode=0o644)


def _start(svc: Service) -> None:
    """Ask the manager to take the definition written (again) and (re)start the gateway with it."""
    if svc.platform == "linux":
        _run("systemctl", "--user", "daemon-reload")
        _run("systemctl", "--user", "enable", f"{svc.name}.service")
        _run("systemctl", "--user", "restart", f"{svc.name}.service")  # starts it, or applies a changed unit
    elif svc.platform == "darwin":
        domain = f"gui/{_uid()}"
        _run("launchctl", "bootout", f"{domain}/{svc.name}", check=False)  # loaded before: loaded again
        _run("launchctl", "enable", f"{domain}/{svc.name}")
        _run("launchctl", "bootstrap", domain, str(svc.path))
    else:
        _run("schtasks", "/Create", "/TN", svc.name, "/XML", str(svc.path), "/F")
        _run("schtasks", "/Run", "/TN", svc.name)


def _remove(svc: Service, root: Path) -> None:
    """Stop the service's gateway and forget its definition (the manager's and the file)."""
    if svc.platform == "linux":
        session = systemd_session() is None  # without one, no unit of it can be running
        if session:
            _run("systemctl", "--user", "disable", "--now", f"{svc.name}.service")
        svc.path.unlink(missing_ok=True)
        if session:
            _run("systemctl", "--user", "daemon-reload")
    elif svc.platform == "darwin":
        _run("launchctl", "bootout", f"gui/{_uid()}/{svc.name}", check=False)  # SIGTERM: a graceful stop
        svc.path.unlink(missing_ok=True)
    else:
        asyncio.run(stop_gateway(root))  # graceful: Task Scheduler's /End would end the process at once
        _run("schtasks", "/End", "/TN", svc.name, check=False)
        _run("schtasks", "/Delete", "/TN", svc.name, "/F")
        svc.path.unlink(missing_ok=True)


def install_service(root: Path, platform: str | None = None) -> dict[str, Any]:
    """Write this home's service, have its manager load it (again) and start the gateway; what was done."""
    svc = service_of(root, platform)
    if svc.platform == "linux" and (why := systemd_session()) is not None:
        raise UsageError(
            f"no systemd user session here: {why}. Nothing was installed. The unit it would write to "
            f"{str(svc.path)!r} is printed on stdout (--json: as `definition`). Run the gateway otherwise: "
            "`backchannel gateway` in a terminal (or under tmux or nohup), or enable your user manager "
            "(`loginctl enable-linger $USER`, then log in again) and run `backchannel gateway install` again",
            code="no_service_manager",
            details={"path": str(svc.path), "definition": svc.text},
        )
    again = _installed(svc)
    running = runtime.listening(root)
    if running is not None and not again:
        raise UsageError(
            f"a gateway already runs for the home {str(root)!r} (pid {running.pid}, {running.url}), not as its "
            "service: stop it first (`backchannel gateway stop`), then install; nothing was installed"
        )
    if again and svc.platform == "win32":
        asyncio.run(stop_gateway(root))  # the task's gateway, stopped gracefully before it is started again
    existed = svc.path.is_file()
    _write(svc)
    try:
        _start(svc)
    except GatewayError:
        if not existed:  # nothing half-done: a first install that failed leaves no definition behind
            svc.path.unlink(missing_ok=True)
            if svc.platform == "linux":
                _run("systemctl", "--user", "daemon-reload", check=False)
        raise
    found = _wait_for_gateway(root, ANSWER_SECONDS)
    return {
        "result": "reinstalled" if again else "installed",
        "platform": svc.platform,
        "name": svc.name,
        "definition": str(svc.path),
        "command": list(svc.command),
        "log": str(log_path(root)),
        "gateway": found,
    }


def _wait_for_gateway(root: Path, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        found = gateway_state(root)
        if found["answers"] or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def gateway_state(root: Path) -> dict[str, Any]:
    """Whether the home's gateway runs (its runtime file) and answers as itself (`/health`)."""
    found = runtime.listening(root)
    if found is None:
        return {"running": False, "answers": False, "pid": None, "url": None}

    async def answers() -> bool:
        client = await find_gateway(root)
        if client is None:
            return False
        await client.aclose()
        return True

    return {"running": True, "answers": asyncio.run(answers()), "pid": found.pid, "url": found.url}


def _manager_state(svc: Service) -> str | None:
    """What the manager says of the service (systemd's active state, launchd's, the task's status), if asked."""
    if svc.platform == "linux":
        if systemd_session() is not None:
            return None
        return _run("systemctl", "--user", "is-active", f"{svc.name}.service", check=False).stdout.strip() or None
    if svc.platform == "darwin":
        done = _run("launchctl", "print", f"gui/{_uid()}/{svc.name}", check=False)
        return "loaded" if done.returncode == 0 else "not loaded"
    done = _run("schtasks", "/Query", "/TN", svc.name, "/FO", "LIST", check=False)
    status = [line.split(":", 1)[1].strip() for line in done.stdout.splitlines() if line.startswith("Status:")]
    return status[0] if status else None


@click.command("install", epilog=examples("backchannel gateway install", "backchannel --home ~/work gateway install"))
@JSON_OPTION
def install(as_json: bool) -> None:
    """Run the gateway as a service: now, at logon, after a failure.

    It is started now and at each logon, and again when it fails.
    \b
    Linux:   a systemd user unit ~/.config/systemd/user/backchannel-gateway[-<home>].service,
             then `systemctl --user daemon-reload`, `enable` and `restart`
    macOS:   a launchd agent ~/Library/LaunchAgents/io.backchannel.backchannel-gateway[-<home>].plist,
             loaded with `launchctl bootstrap gui/<uid>`
    Windows: a Task Scheduler task at your logon (limited rights: no administrator needed), from
             gateway-task.xml in the home, started at once (`schtasks /Run`)

    It runs `<this python> -m backchannel gateway` for this home; another home gets a service of its own.
    Installing again writes the same definition and restarts the gateway with it. Its log: `backchannel logs`.
    Where Linux has no systemd user session, nothing is installed: the unit is printed and the exit is 2.
    """
    root = config.home()
    config.require_home(root)
    try:
        done = install_service(root)
    except UsageError as exc:
        if exc.code == "no_service_manager" and not as_json:
            click.echo(str(exc.details["definition"]), nl=False)
        raise
    gw = done["gateway"]

    def text() -> None:
        click.echo(f"{done['result']} {done['name']}: {done['definition']}")
        if gw["answers"]:
            click.echo(f"the gateway runs (pid {gw['pid']}, {gw['url']}); its log: {done['log']}")
        else:
            note(f"the gateway does not answer yet: see `backchannel logs` ({done['log']})")

    emit(done, as_json=as_json, text=text)


@click.command("uninstall", epilog=examples("backchannel gateway uninstall", "backchannel gateway uninstall --json"))
@JSON_OPTION
def uninstall(as_json: bool) -> None:
    """Stop the gateway service and remove it.

    Its definition and the manager's entry go.
    The gateway stops as on `gateway stop` (running turns get its grace; the rest run again on its next start).
    The home, its log and its store are left as they are. Exit 0 also when no service is installed.
    """
    root = config.home()
    config.require_home(root)
    svc = service_of(root)
    installed = _installed(svc)
    if installed:
        _remove(svc, root)
    done = {"result": "uninstalled" if installed else "not_installed", "name": svc.name, "definition": str(svc.path)}

    def text() -> None:
        if installed:
            click.echo(f"uninstalled {svc.name}: removed {svc.path}")
        else:
            note(f"no gateway service is installed for the home {str(root)!r} ({svc.path} does not exist)")

    emit(done, as_json=as_json, text=text)


@click.command("status", epilog=examples("backchannel gateway status", "backchannel gateway status --json"))
@JSON_OPTION
def status(as_json: bool) -> None:
    """Whether the service is installed and the gateway answers.

    Also where the service's definition is.
    The gateway is found as `gateway stop` finds it: the home's runtime file, then its /health. Exit 0 whatever
    it finds.
    """
    root = config.home()
    config.require_home(root)
    svc = service_of(root)
    installed = _installed(svc)
    gw = gateway_state(root)
    done = {
        "installed": installed,
        "platform": svc.platform,
        "name": svc.name,
        "definition": str(svc.path),
        "manager": _manager_state(svc) if installed else None,
        "log": str(log_path(root)),
        "gateway": gw,
    }

    def text() -> None:
        if installed:
            state = f" ({done['manager']})" if done["manager"] else ""
            click.echo(f"service: {svc.name} installed{state}: {svc.path}")
        else:
            click.echo(f"service: not installed (`backchannel gateway install` writes {svc.path})")
        if gw["answers"]:
            click.echo(f"gateway: running, answers (pid {gw['pid']}, {gw['url']})")
        elif gw["running"]:
            click.echo(f"gateway: running (pid {gw['pid']}, {gw['url']}) but does not answer as itself")
        else:
            click.echo("gateway: not running")
        click.echo(f"log: {done['log']}")

    emit(done, as_json=as_json, text=text)
