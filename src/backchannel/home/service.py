"""The home's gateway as a service of the user's session, its definition for each platform: a systemd user unit
(Linux), a launchd agent (macOS), a Task Scheduler logon task (Windows). Pure text, from the platform given (so
each is written and checked on any machine); `cli/gateway_service.py` installs them.

Each runs `<python> -m backchannel gateway` for one home, restarts it when it fails and starts it at logon. The
default home (~/.backchannel) is `backchannel-gateway`; any other home's name adds its folder's name and a hash of
its path, so two homes have two services."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

BASE_NAME = "backchannel-gateway"
LAUNCHD_PREFIX = "io.backchannel."
STOP_SECONDS = 60  # the manager's wait for a graceful stop: twice the default grace, and the store's closing
RESTART_SECONDS = 5
TASK_FILE = "gateway-task.xml"  # Windows: the task's definition as given to Task Scheduler, kept in the home
USAGE_EXIT = 2  # a refused start (a broken config, the home held by another gateway): restarting would not help


@dataclass(frozen=True)
class Service:
    """A home's service on one platform: its name, the file that defines it, the text of that file."""

    platform: str  # linux, darwin or win32 (sys.platform's names)
    name: str  # the unit's, the launchd label's or the task's name
    path: Path  # where the definition is written (on Windows, a copy kept in the home for `schtasks /Create /XML`)
    text: str
    command: tuple[str, ...]  # what it runs


def service_name(root: Path, default_home: Path) -> str:
    """`backchannel-gateway` for the default home; `backchannel-gateway-<folder>-<hash>` for any other."""
    home = root.expanduser().absolute()
    if home == default_home.expanduser().absolute():
        return BASE_NAME
    folder = re.sub(r"[^a-z0-9]+", "-", home.name.lower()).strip("-")[:24] or "home"
    digest = hashlib.sha256(str(home).encode("utf-8")).hexdigest()[:8]
    return f"{BASE_NAME}-{folder}-{digest}"


def definition(
    root: Path, *, platform: str, python: str, user_home: Path, default_home: Path, user: str = ""
) -> Service:
    """The service of the home `root` on `platform`, running `python -m backchannel gateway`; `user_home` is the
    user's home folder (where the definition goes), `user` the Windows account (DOMAIN\\name) the task runs as."""
    root = root.expanduser().absolute()
    name = service_name(root, default_home)
    command: tuple[str, ...] = (python, "-m", "backchannel", "gateway")  # the home: in its environment
    if platform.startswith("linux"):
        path = user_home / ".config" / "systemd" / "user" / f"{name}.service"
        return Service("linux", name, path, systemd_unit(root, command), command)
    if platform == "darwin":
        label = LAUNCHD_PREFIX + name
        path = user_home / "Library" / "LaunchAgents" / f"{label}.plist"
        return Service("darwin", label, path, launchd_plist(root, label, command), command)
    if platform == "win32":
        command = (*command, "--home", str(root))  # a task has no environment of its own
        return Service("win32", name, root / TASK_FILE, task_xml(root, user, command), command)
    raise ValueError(f"no service definition for the platform {platform!r} (linux, darwin or win32)")


# --- Linux: a systemd user unit ------------------------------------------------------------------------------


def _systemd_word(word: str) -> str:
    """One word of a unit's command line or Environment=: quoted, its specifiers (%) and variables ($) literal."""
    quoted = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return quoted if re.fullmatch(r"[\w@+=:,./-]+", word) else f'"{quoted}"'


def systemd_unit(root: Path, command: tuple[str, ...]) -> str:
    exec_start = " ".join(_systemd_word(w).replace("$", "$$") for w in command)
    return (
        "[Unit]\n"
        f"Description=Backchannel gateway of the home {str(root).replace('%', '%%')}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"Environment={_systemd_word(f'BACKCHANNEL_HOME={root}')}\n"
        'Environment="PYTHONUNBUFFERED=1"\n'
        f"ExecStart={exec_start}\n"
        "Restart=on-failure\n"
        f"RestartSec={RESTART_SECONDS}\n"
        f"RestartPreventExitStatus={USAGE_EXIT}\n"
        "KillSignal=SIGTERM\n"
        f"TimeoutStopSec={STOP_SECONDS}\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


# --- macOS: a launchd agent ----------------------------------------------------------------------------------


def launchd_plist(root: Path, label: str, command: tuple[str, ...]) -> str:
    arguments = "".join(f"\n        <string>{escape(w)}</string>" for w in command)
    log = escape(str(root / "logs" / "launchd.log"))  # what the gateway prints before its log file is open
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
    <key>Label</key>
    <string>{escape(label)}</string>
    <key>ProgramArguments</key>
    <array>{arguments}
    </array>
    <key>EnvironmentVariables</key>
    <dict>
        <key>BACKCHANNEL_HOME</key>
        <string>{escape(str(root))}</string>
        <key>PYTHONUNBUFFERED</key>
        <string>1</string>
    </dict>
    <key>RunAtLoad</key>
    <true/>
    <key>KeepAlive</key>
    <dict>
        <key>SuccessfulExit</key>
        <false/>
    </dict>
    <key>ThrottleInterval</key>
    <integer>{RESTART_SECONDS}</integer>
    <key>ExitTimeOut</key>
    <integer>{STOP_SECONDS}</integer>
    <key>StandardErrorPath</key>
    <string>{log}</string>
    <key>StandardOutPath</key>
    <string>{log}</string>
</dict>
</plist>
"""


# --- Windows: a Task Scheduler task at logon -----------------------------------------------------------------


def _windows_arguments(words: tuple[str, ...]) -> str:
    """Words as one command line Windows' C runtime splits back into the same words."""
    out = []
    for word in words:
        if word and not re.search(r'[\s"]', word):
            out.append(word)
            continue
        quoted = re.sub(r'(\\*)"', r'\1\1\\"', word)  # backslashes before a quote doubled, the quote escaped
        quoted = re.sub(r"(\\+)$", r"\1\1", quoted)  # and before the closing quote
        out.append(f'"{quoted}"')
    return " ".join(out)


def task_xml(root: Path, user: str, command: tuple[str, ...]) -> str:
    """A task at the user's logon, run as that user with limited rights (no administrator needed), never stopped
    for running long or on battery, restarted when it fails (every minute, up to 999 times)."""
    who = f"\n      <UserId>{escape(user)}</UserId>" if user else ""
    return f"""<?xml version="1.0" encoding="UTF-16"?>
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>Backchannel gateway of the home {escape(str(root))}</Description>
  </RegistrationInfo>
  <Triggers>
    <LogonTrigger>
      <Enabled>true</Enabled>{who}
    </LogonTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">{who}
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <AllowHardTerminate>true</AllowHardTerminate>
    <StartWhenAvailable>true</StartWhenAvailable>
    <AllowStartOnDemand>true</AllowStartOnDemand>
    <Enabled>true</Enabled>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>999</Count>
    </RestartOnFailure>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{escape(command[0])}</Command>
      <Arguments>{escape(_windows_arguments(command[1:]))}</Arguments>
      <WorkingDirectory>{escape(str(root))}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"""
