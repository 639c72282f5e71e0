"""The Windows walk-through: Backchannel used as a person uses it in cmd, on Windows's own Python.

    python scripts\\windows\\walkthrough.py [--port 18100] [--keep]

Runs on Windows (here: the embeddable CPython under Wine, started by check.py). Every step runs the
installed `backchannel.exe` (the gateways: `backchannel.exe gateway` and `python -m backchannel gateway`)
as a separate process, prints the command as cmd takes it and what it printed, and asserts what it
promises. Standard output is a pipe in the console's code page (cp1252), as when a person pipes a
command into another: nothing may fail to print. Two fresh homes in a temporary folder, on the echo
engine, removed at the end unless --keep. Exit 0 when every step passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import locale
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

WINDOWS = sys.platform == "win32"
# pip's console scripts: Scripts\backchannel.exe on Windows (bin/backchannel in a POSIX venv, for --anywhere)
SCRIPTS = Path(sys.executable).parent / "Scripts" if WINDOWS else Path(sys.executable).parent
BACKCHANNEL = SCRIPTS / ("backchannel.exe" if WINDOWS else "backchannel")
COMMAND_SECONDS = 600  # one command under a loaded Wine; a hang is a failure, not a wait forever
TEXT = "héllo café ✓"
AS_TYPED = "*.md %PATH% $HOME ~ and C:\\Temp\\*.txt"
UNICODE = "status → ok? 🎉 漢字"


class StepFailed(Exception):
    """A step's command exited with an unexpected code, printed something unexpected, or showed a traceback."""


@dataclass
class Done:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, object]:
        value: dict[str, object] = json.loads(self.out)
        return value


@dataclass
class Walk:
    """The walk-through's two homes (home and spark), their gateway ports, and the gateways it started."""

    base: Path
    port: int
    gateways: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def home(self, label: str) -> Path:
        return self.base / label

    def port_of(self, label: str) -> int:
        return self.port + (0 if label == "home" else 1)

    def env(self, label: str) -> dict[str, str]:
        """The environment of a cmd window with BACKCHANNEL_HOME set and backchannel on PATH; nothing that
        would make Python speak UTF-8 on its own (the product has to)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONIO", "PYTHONUTF8", "BACKCHANNEL_"))}
        env["BACKCHANNEL_HOME"] = str(self.home(label))
        env["PATH"] = f"{SCRIPTS}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, label: str, *args: str, stdin: bytes | Path | None = None, expect: int = 0, note: str = "") -> Done:
        """`backchannel ARGS` on that home, stdin from bytes or a file; what it printed, checked for UTF-8
        and for no traceback, and its exit code checked against `expect`."""
        shown = subprocess.list2cmdline(["backchannel", *args])
        if isinstance(stdin, Path):
            shown += f" < {stdin.name}"
        say(f"[{label}] > {shown}" + (f"   :: {note}" if note else ""))
        if isinstance(stdin, Path):
            with stdin.open("rb") as source:
                proc = subprocess.run(
                    [str(BACKCHANNEL), *args],
                    stdin=source,
                    capture_output=True,
                    env=self.env(label),
                    cwd=self.base,
                    timeout=COMMAND_SECONDS,
                )
        else:
            proc = subprocess.run(
                [str(BACKCHANNEL), *args],
                input=stdin if stdin is not None else b"",
                capture_output=True,
                env=self.env(label),
                cwd=self.base,
                timeout=COMMAND_SECONDS,
            )
        return self._checked(proc, expect)

    def cmd(self, label: str, line: str, expect: int = 0) -> Done:
        """`line` typed into cmd (`cmd /c`), in the walk's folder: cmd's own quoting and `<` redirection."""
        say(f"[{label}] > {line}   :: through cmd.exe")
        proc = subprocess.run(
            line, shell=True, capture_output=True, env=self.env(label), cwd=self.base, timeout=COMMAND_SECONDS
        )
        return self._checked(proc, expect)

    def _checked(self, proc: subprocess.CompletedProcess[bytes], expect: int) -> Done:
        try:
            done = Done(proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise StepFailed(f"printed bytes that are not UTF-8 ({exc}): {proc.stdout!r} {proc.stderr!r}") from None
        for line in (done.out + done.err).replace("\r\n", "\n").rstrip().splitlines():
            say(f"    {line}")
        if "Traceback" in done.err or "Traceback" in done.out:
            raise StepFailed("printed a traceback")
        if done.code != expect:
            raise StepFailed(f"exited {done.code}, expected {expect}")
        done.out = done.out.replace("\r\n", "\n")
        done.err = done.err.replace("\r\n", "\n")
        return done

    def start_gateway(self, label: str, *, as_module: bool) -> None:
        """The home's gateway in the background (its own console-less process, output to a log file)."""
        command = [sys.executable, "-m", "backchannel", "gateway"] if as_module else [str(BACKCHANNEL), "gateway"]
        shown = "python -m backchannel gateway" if as_module else "backchannel gateway"
        log = self.base / f"{label}-gateway.log"
        say(f"[{label}] > {shown}   :: in the background, log {log.name}")
        with log.open("wb") as out:
            self.gateways[label] = subprocess.Popen(
                command, env=self.env(label), cwd=self.base, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            )
        url = f"http://127.0.0.1:{self.port_of(label)}/health"
        deadline = time.monotonic() + COMMAND_SECONDS
        while time.monotonic() < deadline:
            if self.gateways[label].poll() is not None:
                raise StepFailed(f"the gateway exited {self.gateways[label].returncode}:\n{self.log(label)}")
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        say(f"    listening on http://127.0.0.1:{self.port_of(label)}")
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        raise StepFailed(f"the gateway did not answer {url}:\n{self.log(label)}")

    def log(self, label: str) -> str:
        return (self.base / f"{label}-gateway.log").read_text(encoding="utf-8", errors="replace")

    def stop_gateway(self, label: str) -> int:
        """`backchannel gateway stop` on its home; the gateway's exit code once it is gone."""
        self.run(label, "gateway", "stop")
        proc = self.gateways.pop(label)
        try:
            return proc.wait(COMMAND_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise StepFailed(f"the gateway was still running after `gateway stop`:\n{self.log(label)}") from None

    def cleanup(self) -> None:
        for label, proc in list(self.gateways.items()):
            try:
                self.stop_gateway(label)
            except (StepFailed, subprocess.TimeoutExpired, OSError) as exc:
                say(f"    (stopping {label}'s gateway: {exc}; killed)")
                proc.kill()


def say(line: str) -> None:
    print(line, flush=True)


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise StepFailed(what)


# --- the steps ---------------------------------------------------------------------------------------------


def code_page(walk: Walk) -> None:
    """The console's code page is not UTF-8: the output steps below then mean something."""
    encoding = locale.getencoding()
    say(f"    code page {encoding}, stdout a pipe: {not sys.stdout.isatty()}")
    if not WINDOWS:
        return
    expect(encoding.lower().replace("-", "") not in ("utf8", "cp65001"), f"the code page is {encoding}")


def init_and_profiles(walk: Walk) -> None:
    done = walk.run("home", "init", "--port", str(walk.port_of("home")))
    expect((walk.home("home") / "config.yaml").exists(), "no config.yaml in the home")
    expect('"' in done.out or "backchannel" in done.out, "init printed no first command")
    walk.run("home", "profile", "create", "research")
    walk.run("home", "profile", "create", "builds")
    listed = walk.run("home", "profile", "list", "--json").json()
    names = sorted(str(p["name"]) for p in listed) if isinstance(listed, list) else []  # type: ignore[index]
    expect(names == ["builds", "default", "research"], f"profiles {names}")


def allow_rules(walk: Walk) -> None:
    walk.run("home", "send", "research", "/send builds is the build green?", note="refused: nobody allowed yet")
    walk.run("home", "profile", "allow", "research", "builds")
    done = walk.run("home", "send", "research", "/send builds is the build green?", "--json")
    expect("builds (echo): is the build green?" in done.out, "research got no reply from builds")


def arguments_as_typed(walk: Walk) -> None:
    reply = walk.run("home", "send", "builds", AS_TYPED, "--json").json()["reply"]
    expect(reply == f"builds (echo): {AS_TYPED}", f"the message arrived as {reply!r}")


def unicode_reply_into_a_pipe(walk: Walk) -> None:
    done = walk.run("home", "send", "builds", UNICODE)
    expect(done.out.splitlines() == [f"builds (echo): {UNICODE}"], f"printed {done.out!r}")


def utf8_on_stdin(walk: Walk) -> None:
    plain = walk.base / "question.txt"
    plain.write_bytes(TEXT.encode("utf-8") + b"\r\n")
    done = walk.cmd("home", "backchannel send builds - < question.txt")
    expect(done.out.splitlines() == [f"builds (echo): {TEXT}"], f"printed {done.out!r}")
    marked = walk.base / "question-bom.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + TEXT.encode("utf-8") + b"\r\n")
    done = walk.run("home", "send", "builds", "-", stdin=marked, note="the same with a byte order mark")
    expect(done.out.splitlines() == [f"builds (echo): {TEXT}"], f"printed {done.out!r}")
    runs = walk.run("home", "runs", "list", "-p", "builds", "--json").json()
    stored = [r["message"] for r in runs][:2] if isinstance(runs, list) else []  # type: ignore[index]
    expect(stored == [TEXT, TEXT], f"stored as {stored!r}")


def device_name_refused(walk: Walk) -> None:
    done = walk.run("home", "profile", "create", "con", expect=2)
    expect("'con'" in done.err and "devices on Windows" in done.err, "no clear error for `con`")
    expect(not (walk.home("home") / "profiles" / "con").exists(), "a `con` profile folder was left")


def through_the_gateway(walk: Walk) -> None:
    walk.start_gateway("home", as_module=False)
    sent = walk.run("home", "send", "builds", "through the gateway", "--json").json()
    expect(sent["via"] == "gateway", f"sent via {sent['via']}")
    expect(sent["reply"] == "builds (echo): through the gateway", f"reply {sent['reply']!r}")


def peers(walk: Walk) -> None:
    walk.run("spark", "init", "--port", str(walk.port_of("spark")))
    walk.start_gateway("spark", as_module=True)
    key = walk.run("spark", "key", "create", "home", "--profile", "*", note="home's key at spark").out.strip()
    url = f"http://127.0.0.1:{walk.port_of('spark')}"
    done = walk.run(
        "home",
        "peer",
        "add",
        "spark",
        "--url",
        url,
        "--key-back",
        "--as",
        "home",
        stdin=key.encode(),
        note="key on stdin",
    )
    back = [line.strip() for line in done.out.splitlines() if line.strip().startswith("backchannel peer add home")]
    expect(len(back) == 1, f"no command for spark in {done.out!r}")
    walk.cmd("spark", back[0])  # the printed command, pasted into cmd on the other side
    reply = walk.run("home", "peer", "dm", "spark", "disk status → ok?", "--json").json()["reply"]
    expect(reply == "default (echo): disk status → ok?", f"peer dm replied {reply!r}")
    back_reply = walk.run("spark", "peer", "dm", "home", "and back?", "--json").json()["reply"]
    expect(back_reply == "default (echo): and back?", f"peer dm back replied {back_reply!r}")


def ledgers(walk: Walk) -> None:
    done = walk.run("spark", "ledger")
    expect("peer:home" in done.out and "disk status → ok?" in done.out, "spark's ledger lacks home's message")
    entries = walk.run("home", "ledger", "--json").json()
    expect(isinstance(entries, list) and len(entries) >= 8, f"home's ledger has {entries!r}")


def gateways_stop(walk: Walk) -> None:
    for label in ("home", "spark"):
        code = walk.stop_gateway(label)
        say(f"    {label}'s gateway exited {code}")
        expect(code == 0, f"{label}'s gateway exited {code} after `gateway stop`")
        expect("Traceback" not in walk.log(label), f"{label}'s gateway log has a traceback:\n{walk.log(label)}")
    done = walk.run("home", "gateway", "stop", note="none runs: still exit 0")
    expect(done.code == 0, "gateway stop without a gateway failed")


STEPS: Sequence[tuple[str, Callable[[Walk], None]]] = (
    ("the code page is cp1252, not UTF-8", code_page),
    ("init, two profiles", init_and_profiles),
    ("allow rules: refused, then allowed", allow_rules),
    ("*.md %PATH% $HOME ~ arrive as typed", arguments_as_typed),
    ("→, emoji, CJK in a reply printed into a pipe", unicode_reply_into_a_pipe),
    ("UTF-8 on stdin (cmd's <; with a BOM), stored exactly", utf8_on_stdin),
    ("profile create con: refused, nothing made", device_name_refused),
    ("a gateway in the background; send through it", through_the_gateway),
    ("a second home; peer add (its printed command in cmd), peer dm both ways", peers),
    ("ledger on both homes", ledgers),
    ("gateway stop: both exit 0", gateways_stop),
)


def main() -> int:
    sys.stdout.reconfigure(encoding="utf-8", errors="backslashreplace")  # type: ignore[union-attr]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18100, help="home's gateway port; spark's is the next one")
    parser.add_argument("--keep", action="store_true", help="keep the two homes")
    parser.add_argument("--anywhere", action="store_true", help="run on this platform too (to try the steps out)")
    options = parser.parse_args()
    if not WINDOWS and not options.anywhere:
        say("the walk-through runs on Windows (make windows runs it under Wine; --anywhere runs it here)")
        return 2
    if not BACKCHANNEL.exists():
        say(f"no {BACKCHANNEL}: install the project first (pip install -e .[dev])")
        return 2
    walk = Walk(Path(tempfile.mkdtemp(prefix="backchannel-walk-")), options.port)
    say(f"Python {sys.version.split()[0]} on {sys.platform}; homes in {walk.base}; {BACKCHANNEL}")
    results: list[tuple[str, bool, float]] = []
    try:
        for title, body in STEPS:
            say(f"\n## {title}")
            started = time.monotonic()
            try:
                body(walk)
            except (StepFailed, subprocess.TimeoutExpired, OSError, KeyError, ValueError) as exc:
                if not isinstance(exc, StepFailed):
                    traceback.print_exc(file=sys.stdout)
                say(f"FAILED: {exc}")
                results.append((title, False, time.monotonic() - started))
                break
            results.append((title, True, time.monotonic() - started))
    finally:
        walk.cleanup()
        if not options.keep:
            shutil.rmtree(walk.base, ignore_errors=True)
    say("\n## Walk-through")
    for title, passed, seconds in results:
        say(f"  {'ok  ' if passed else 'FAIL'} {seconds:6.0f}s  {title}")
    for title, _ in STEPS[len(results) :]:
        say(f"  skip          {title}")
    passed = len(results) == len(STEPS) and all(ok for _, ok, _ in results)
    say(f"walk-through: {'passed' if passed else 'FAILED'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
