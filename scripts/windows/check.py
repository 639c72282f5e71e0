"""`make windows`: Backchannel on Windows's own CPython, under Debian's Wine, as docs/windows.md
installs and uses it.

    python scripts/windows/check.py [--skip-walk] [--skip-tests] [--force]

1. prepare (embed.py): the embeddable CPython 3.13 for Windows, pip, `pip install -e .[dev]` with the
   Windows pip, in `.cache/windows/` (once; later runs reuse it);
2. the walk-through (walkthrough.py, run by the Windows Python): init, profiles, rules, sends with what cmd
   passes as typed, UTF-8 into pipes and from stdin, a refused device name, gateways in the background,
   peers, the ledger, `gateway stop`;
3. the pure tests listed in pure-tests.txt, by pytest on the Windows Python.

Prints a summary with each part's time; exit 0 when every part passed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import embed
import wine

HERE = Path(__file__).resolve().parent
PURE_TESTS = HERE / "pure-tests.txt"
WALK_SECONDS = 3600
TEST_SECONDS = 3600


def pure_tests() -> tuple[list[str], list[tuple[str, str]]]:
    """The test files (or ids) of pure-tests.txt, and the ids to deselect with their reason (`-ID  # why`)."""
    selected: list[str] = []
    deselected: list[tuple[str, str]] = []
    for raw in PURE_TESTS.read_text(encoding="utf-8").splitlines():
        line, _, why = raw.partition("#")
        line = line.strip()
        if not line:
            continue
        if line.startswith("-"):
            deselected.append((line[1:].strip(), why.strip()))
        else:
            selected.append(line)
    return selected, deselected


def windows_python(*args: str, timeout: float) -> int:
    code, _ = wine.run([wine.windows_path(embed.PYTHON_DIR / "python.exe"), *args], timeout=timeout)
    return code


def walk() -> int:
    return windows_python(wine.windows_path(HERE / "walkthrough.py"), timeout=WALK_SECONDS)


def tests() -> int:
    selected, deselected = pure_tests()
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not interop and not faults and not browser"]
    for test_id, _why in deselected:
        args += ["--deselect", test_id]
    return windows_python(*args, *selected, timeout=TEST_SECONDS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-walk", action="store_true", help="leave out the walk-through")
    parser.add_argument("--skip-tests", action="store_true", help="leave out the pure tests")
    parser.add_argument("--force", action="store_true", help="prepare the Windows Python again from nothing")
    options = parser.parse_args()
    results: list[tuple[str, str, float]] = []

    def part(name: str, body: object) -> bool:
        print(f"\n=== windows: {name}", flush=True)
        started = time.monotonic()
        try:
            code = body() if callable(body) else 0
        except (SystemExit, TimeoutError, OSError) as exc:  # embed's failures, a hung Wine, a missing program
            print(f"windows: {name}: {exc}", flush=True)
            code = 1
        except Exception as exc:  # subprocess.TimeoutExpired and the like: the part failed, the summary follows
            print(f"windows: {name}: {type(exc).__name__}: {exc}", flush=True)
            code = 1
        outcome = "passed" if code == 0 else f"FAILED (exit {code})"
        results.append((name, outcome, time.monotonic() - started))
        return code == 0

    def prepare() -> int:
        took = embed.prepare(force=options.force)
        if took == 0:
            print("windows: the Windows Python is ready (.cache/windows/.installed)", flush=True)
        return 0

    try:
        ready = part("prepare the Windows Python", prepare)
        if ready and not options.skip_walk:
            part("walk-through (walkthrough.py)", walk)
        if ready and not options.skip_tests:
            part(f"pure tests ({PURE_TESTS.name})", tests)
    finally:
        wine.wineserver_kill()  # anything a failed step left running in the check's own prefix
    print("\n=== windows: summary")
    for name, outcome, seconds in results:
        print(f"  {seconds:6.0f}s  {outcome:<18} {name}")
    failed = [name for name, outcome, _ in results if outcome != "passed"]
    print(f"windows: {'FAILED: ' + ', '.join(failed) if failed else 'all passed'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
