"""`backchannel gateway install | uninstall | status`: the home's gateway as a service of the user's session. The
definitions (systemd unit, launchd plist, Task Scheduler XML) are checked as text on any machine; the install is
driven through stand-in managers on PATH (the systemd one starts the unit's command as systemd would), and through
the real `systemctl --user` where this machine has a user session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from backchannel.cli import gateway_service
from backchannel.home import config, runtime
from backchannel.home.service import BASE_NAME, definition, service_name
from conftest import free_port, run_cli

PY = sys.executable

# A stand-in for systemctl: `--user is-system-running` answers as told; `restart` starts the unit's ExecStart with
# its Environment (as systemd's user manager would), `disable --now` stops it with SIGTERM; every call is recorded.
FAKE_SYSTEMCTL = r"""#!{python}
import json, os, shlex, signal, subprocess, sys, time
from pathlib import Path
state = Path(os.environ["FAKE_MANAGER_DIR"])
args = sys.argv[1:]
with open(state / "calls.jsonl", "a") as f:
    f.write(json.dumps(args) + "\n")
if args[:2] == ["--user", "is-system-running"]:
    answer = (state / "session").read_text().strip()
    print(answer)
    sys.exit(0 if answer == "running" else 1)
unit_dir = Path(os.environ["HOME"]) / ".config/systemd/user"
pid_file = state / "pid"
def stop():
    if pid_file.exists():
        pid = int(pid_file.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        pid_file.unlink()
if args[1:2] == ["restart"]:
    stop()
    lines = (unit_dir / args[2]).read_text().splitlines()
    env = dict(os.environ)
    for line in lines:
        if line.startswith("Environment="):
            name, _, value = shlex.split(line[len("Environment="):])[0].partition("=")
            env[name] = value
    command = shlex.split(next(l for l in lines if l.startswith("ExecStart="))[len("ExecStart="):])
    out = subprocess.DEVNULL
    proc = subprocess.Popen(command, env=env, stdout=out, stderr=out, start_new_session=True)
    pid_file.write_text(str(proc.pid))
elif args[1:3] == ["disable", "--now"]:
    stop()
elif args[1:2] == ["is-active"]:
    print("active" if pid_file.exists() else "inactive")
"""

# launchctl and schtasks stand-ins: record the call, succeed (`schtasks /Query` only once it was created).
FAKE_RECORDER = r"""#!{python}
import json, os, sys
from pathlib import Path
state = Path(os.environ["FAKE_MANAGER_DIR"])
with open(state / "calls.jsonl", "a") as f:
    f.write(json.dumps([Path(sys.argv[0]).name, *sys.argv[1:]]) + "\n")
if sys.argv[1:2] == ["/Create"]:
    (state / "task").write_text("")
if sys.argv[1:2] == ["/Delete"]:
    (state / "task").unlink()
if sys.argv[1:2] == ["/Query"]:
    sys.exit(0 if (state / "task").exists() else 1)
"""


@pytest.fixture
def manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user home folder of its own (where definitions go) and a PATH whose service managers are stand-ins."""
    state = tmp_path / "manager"
    bin_dir = state / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("systemctl", FAKE_SYSTEMCTL), ("launchctl", FAKE_RECORDER), ("schtasks", FAKE_RECORDER)):
        path = bin_dir / name
        path.write_text(text.replace("{python}", PY))
        path.chmod(0o755)
    (state / "session").write_text("running")
    user_home = tmp_path / "user"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("FAKE_MANAGER_DIR", str(state))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return state


def calls(state: Path) -> list[list[str]]:
    path = state / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def on_port(root: Path) -> int:
    port = free_port()
    data = config.load_yaml(config.config_path(root))
    data["gateway"]["port"] = port
    config.write_yaml(config.config_path(root), data)
    return port


def test_each_platforms_definition_as_text(tmp_path: Path) -> None:
    root = tmp_path / "my home"
    made = {
        p: definition(
            root,
            platform=p,
            python="/opt/py/bin/python3",
            user_home=tmp_path / "u",
            default_home=tmp_path / "d",
            user="PC\\ann",
        )
        for p in ("linux", "darwin", "win32")
    }
    unit = made["linux"]
    assert unit.path.parent == tmp_path / "u" / ".config" / "systemd" / "user"
    assert unit.path.name.startswith("backchannel-gateway-my-home-") and unit.path.suffix == ".service"
    lines = unit.text.splitlines()
    assert "ExecStart=/opt/py/bin/python3 -m backchannel gateway" in lines
    assert f'Environment="BACKCHANNEL_HOME={root}"' in lines
    assert {"Restart=on-failure", "RestartPreventExitStatus=2", "WantedBy=default.target"} <= set(lines)

    plist = made["darwin"]
    assert plist.path.parent == tmp_path / "u" / "Library" / "LaunchAgents"
    assert plist.path.name == f"{plist.name}.plist" and plist.name.startswith("io.backchannel.backchannel-gateway-")
    body = " ".join(plist.text.split())
    assert "<key>RunAtLoad</key> <true/>" in body
    assert "<key>KeepAlive</key> <dict> <key>SuccessfulExit</key> <false/> </dict>" in body
    assert "<string>/opt/py/bin/python3</string> <string>-m</string> <string>backchannel</string>" in body
    assert f"<key>BACKCHANNEL_HOME</key> <string>{root}</string>" in body

    task = made["win32"]
    assert task.path == root / "gateway-task.xml"
    body = " ".join(task.text.split())
    assert "<LogonTrigger> <Enabled>true</Enabled> <UserId>PC\\ann</UserId> </LogonTrigger>" in body
    assert "<RunLevel>LeastPrivilege</RunLevel>" in body  # what /RL LIMITED is: no administrator needed
    assert "<RestartOnFailure> <Interval>PT1M</Interval> <Count>999</Count> </RestartOnFailure>" in body
    assert "<ExecutionTimeLimit>PT0S</ExecutionTimeLimit>" in body  # never stopped for running long
    assert "<Command>/opt/py/bin/python3</Command>" in body
    assert f'<Arguments>-m backchannel gateway --home "{root}"</Arguments>' in body


def test_each_home_has_a_service_of_its_own(tmp_path: Path) -> None:
    default = tmp_path / ".backchannel"
    assert service_name(default, default) == BASE_NAME
    one, two = service_name(tmp_path / "a" / "work", default), service_name(tmp_path / "b" / "work", default)
    assert one != two and one.startswith(f"{BASE_NAME}-work-") and two.startswith(f"{BASE_NAME}-work-")


def test_without_a_systemd_user_session_install_prints_the_unit_and_installs_nothing(
    initialised: Path, manager: Path
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the systemd unit is installed on Linux only")
    (manager / "session").write_text("offline")
    done = run_cli("gateway", "install")
    assert done.exit_code == 2, done.stderr
    assert "no systemd user session" in done.stderr and "Nothing was installed" in done.stderr
    assert "backchannel gateway` in a terminal" in done.stderr
    svc = gateway_service.service_of(initialised)
    assert done.stdout == svc.text
    assert not svc.path.exists() and not svc.path.parent.exists()
    assert [c for c in calls(manager) if c[1:2] != ["is-system-running"]] == []
    as_json = run_cli("gateway", "install", "--json")
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["error"]["definition"] == svc.text


def test_install_runs_the_gateway_under_systemd_again_and_again_and_uninstall_stops_it(
    initialised: Path, manager: Path
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the systemd unit is installed on Linux only")
    port = on_port(initialised)
    try:
        first = run_cli("gateway", "install", "--json")
        assert first.exit_code == 0, first.stderr
        done = json.loads(first.stdout)
        unit = Path(done["definition"])
        assert done["result"] == "installed" and done["gateway"]["answers"], done
        assert done["gateway"]["url"] == f"http://127.0.0.1:{port}"
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        name = unit.name
        assert [c for c in calls(manager) if c[1:2] != ["is-system-running"]] == [
            ["--user", "daemon-reload"],
            ["--user", "enable", name],
            ["--user", "restart", name],
        ]
        text = unit.read_text()
        first_pid = done["gateway"]["pid"]

        again = run_cli("gateway", "install", "--json")  # the same file, loaded again, the gateway restarted
        assert again.exit_code == 0, again.stderr
        redone = json.loads(again.stdout)
        assert redone["result"] == "reinstalled" and redone["gateway"]["answers"]
        assert redone["gateway"]["pid"] != first_pid and unit.read_text() == text
        assert sorted(p.name for p in unit.parent.iterdir()) == [name]

        shown = run_cli("gateway", "status")
        assert shown.exit_code == 0, shown.stderr
        assert f"service: {unit.stem} installed (active): {unit}" in shown.stdout
        assert "gateway: running, answers" in shown.stdout
    finally:
        gone = run_cli("gateway", "uninstall")
    assert gone.exit_code == 0, gone.stderr
    assert f"uninstalled {unit.stem}" in gone.stdout and not unit.exists()
    assert runtime.listening(initialised) is None
    assert ["--user", "disable", "--now", name] in calls(manager)
    after = json.loads(run_cli("gateway", "status", "--json").stdout)
    assert after["installed"] is False and after["gateway"]["running"] is False
    nothing = run_cli("gateway", "uninstall")
    assert nothing.exit_code == 0 and "no gateway service is installed" in nothing.stderr


def test_install_refuses_beside_a_gateway_that_is_not_the_services(initialised: Path, manager: Path) -> None:
    from conftest import GatewayProcess

    gw = GatewayProcess(initialised, on_port(initialised)).start()
    try:
        done = run_cli("gateway", "install")
        assert done.exit_code == 2
        assert "already runs" in done.stderr and "nothing was installed" in done.stderr
        assert not gateway_service.service_of(initialised).path.exists()
    finally:
        gw.close()


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_the_launchd_agent_and_the_logon_task_are_loaded_and_removed(
    initialised: Path, manager: Path, platform: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway_service, "ANSWER_SECONDS", 0)  # the stand-ins start no gateway
    svc = gateway_service.service_of(initialised, platform)
    for _ in range(2):  # idempotent: the same file, loaded again
        done = gateway_service.install_service(initialised, platform)
        assert done["definition"] == str(svc.path) and done["gateway"]["running"] is False
    if platform == "darwin":
        assert svc.path.read_text(encoding="utf-8") == svc.text
        domain = f"gui/{os.getuid()}"
        assert calls(manager) == 2 * [
            ["launchctl", "bootout", f"{domain}/{svc.name}"],
            ["launchctl", "enable", f"{domain}/{svc.name}"],
            ["launchctl", "bootstrap", domain, str(svc.path)],
        ]
    else:
        raw = svc.path.read_bytes()
        assert raw.startswith(b"\xff\xfe") and raw.decode("utf-16") == svc.text  # as Task Scheduler reads it
        made = [c for c in calls(manager) if c[1] in ("/Create", "/Run")]
        assert made == 2 * [
            ["schtasks", "/Create", "/TN", svc.name, "/XML", str(svc.path), "/F"],
            ["schtasks", "/Run", "/TN", svc.name],
        ]
    gateway_service._remove(svc, initialised)
    assert not svc.path.exists()
    last = calls(manager)[-1]
    assert last[:2] == (["launchctl", "bootout"] if platform == "darwin" else ["schtasks", "/Delete"])


def _systemd_user_session() -> str | None:
    if shutil.which("systemctl") is None:
        return "no systemctl here"
    state = subprocess.run(["systemctl", "--user", "is-system-running"], capture_output=True, text=True).stdout
    return None if state.strip() in ("running", "degraded") else f"no systemd user session here ({state.strip()})"


@pytest.mark.skipif(_systemd_user_session() is not None, reason=str(_systemd_user_session()))
def test_a_real_systemd_user_install(initialised: Path) -> None:
    port = on_port(initialised)
    try:
        done = run_cli("gateway", "install", "--json")
        assert done.exit_code == 0, done.stderr
        assert json.loads(done.stdout)["gateway"]["answers"]
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    finally:
        gone = run_cli("gateway", "uninstall")
    assert gone.exit_code == 0, gone.stderr
    assert runtime.listening(initialised) is None
