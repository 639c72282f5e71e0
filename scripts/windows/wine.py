"""Run a Windows program under Debian's Wine, from Linux, in the Windows check's own prefix.

    python scripts/windows/wine.py python.exe -c "import sys; print(sys.platform)"

The prefix lives under the cache folder (`.cache/windows/prefix`, made by `wineboot -i` on first use). Wine
passes the Linux environment on to the Windows program, so it gets a cleaned one: no `PIP_*`, `PYTHON*`,
`VIRTUAL_ENV` or `BACKCHANNEL_*` of this machine. Its standard streams are pipes (Wine 8 gives a Windows
program an invalid handle for a Linux file as stdout); what it prints is relayed as it comes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "windows"
PREFIX = CACHE / "prefix"

_DROPPED = ("PIP_", "PYTHON", "VIRTUAL_ENV", "BACKCHANNEL_", "CONDA", "WINE")


def windows_path(path: Path) -> str:
    """`path` as the Windows program sees it: Wine maps the Linux root to drive Z:."""
    return "Z:" + str(path.resolve()).replace("/", "\\")


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(_DROPPED)}
    env.update(
        WINEPREFIX=str(PREFIX),
        WINEDEBUG="-all",
        WINEDLLOVERRIDES="mscoree,mshtml=",  # no prompt to install Wine's Mono and Gecko
        WINEARCH="win64",
    )
    env.update(extra or {})
    return env


def ensure_prefix() -> None:
    """Make the prefix once (`wineboot -i`); later calls find it."""
    if (PREFIX / "system.reg").exists():
        return
    PREFIX.parent.mkdir(parents=True, exist_ok=True)
    print(f"wine: making the prefix {PREFIX.relative_to(ROOT)} (wineboot -i, once)", flush=True)
    done = subprocess.run(
        ["wine", "wineboot", "-i"], env=environment(), stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    if done.returncode != 0 or not (PREFIX / "system.reg").exists():
        raise SystemExit(f"wine: wineboot -i failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    wineserver_wait()


def wineserver_wait() -> None:
    """Wait until the prefix's wineserver has written everything and exited."""
    subprocess.run(["wineserver", "-w"], env=environment(), stdin=subprocess.DEVNULL, check=False)


def wineserver_kill() -> None:
    """End every Windows process still running in the check's own prefix (and its wineserver)."""
    if PREFIX.exists():
        subprocess.run(["wineserver", "-k"], env=environment(), stdin=subprocess.DEVNULL, check=False)


def run(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    echo: bool = True,
) -> tuple[int, str]:
    """Run `command` (a Windows program and its arguments) under Wine; its exit code and all it printed
    (stdout and stderr together), relayed line by line as it comes when `echo`."""
    ensure_prefix()
    proc = subprocess.Popen(
        ["wine", *command],
        cwd=cwd or ROOT,
        env=environment(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines: list[str] = []

    def relay() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = _text(raw)
            lines.append(line)
            if echo:
                sys.stdout.write(line)
                sys.stdout.flush()

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.kill()
        proc.wait()
        raise
    finally:
        reader.join(10)  # a program it left running may hold the pipe open: what came until now is kept
    return code, "".join(lines)


def _text(raw: bytes) -> str:
    """A line a Windows program printed: UTF-8 (as Backchannel prints), else the code page (as pytest does)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("cp1252", "replace")
    return text.replace("\r\n", "\n")


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    code, _ = run(list(argv), cwd=Path.cwd())
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
