"""Installable as written: the wheel `make dist` builds (PyPA's `build`: the sdist, then the wheel from it) installs
into a clean venv and into Hermes's venv, and there `backchannel --version`, `init` and a send work; in Hermes's,
the plugin is the wheel's and Hermes lists it enabled once `backchannel hermes connect` has run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hermes_gateway import HERMES_19, REQUIRE_VAR

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.interop
INSTALL_SECONDS = 600


def run(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, ROOT, timeout=INSTALL_SECONDS)  # what `make dist` runs
    (built,) = out.glob("agent_backchannel-*-py3-none-any.whl")
    names = zipfile.ZipFile(built).namelist()
    assert "backchannel/api/web/templates/base.html" in names and "backchannel_hermes/__init__.py" in names
    return built


def works(bin_dir: Path, home: Path) -> None:
    """The README's first steps with the installed command: its version, a home, a message answered."""
    backchannel = bin_dir / ("backchannel.exe" if os.name == "nt" else "backchannel")
    assert run(backchannel, "--version").strip() == "backchannel, version 0.1.0"
    env = {"BACKCHANNEL_HOME": str(home)}
    run(backchannel, "init", env=env)
    sent = json.loads(run(backchannel, "send", "default", "hello from the wheel", "--json", env=env))
    assert sent["result"] == "delivered" and "hello from the wheel" in sent["reply"], sent


def test_the_wheel_installs_into_a_clean_venv(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", wheel, timeout=INSTALL_SECONDS)
    listed = run(python, "-m", "pip", "list", "--format", "json")
    assert {"name": "agent-backchannel", "version": "0.1.0"} in json.loads(listed)
    works(venv / "bin", tmp_path / "home")


@pytest.fixture
def hermes_venv(tmp_path: Path) -> Iterator[Path]:
    """A copy of Hermes's venv (.venv-hermes, where `make interop` installed Backchannel editable), so that the
    wheel replaces that install in the copy only."""
    if not HERMES_19.installed:
        if os.environ.get(REQUIRE_VAR):
            pytest.fail(f"no Hermes {HERMES_19.version} in {HERMES_19.venv}: run `make {HERMES_19.make}`")
        pytest.skip(f"no Hermes {HERMES_19.version} in {HERMES_19.venv}: run `make {HERMES_19.make}`")
    copy = tmp_path / "hermes-venv"
    shutil.copytree(HERMES_19.python.parent.parent, copy, symlinks=True)
    yield copy


def test_the_wheel_installs_into_hermess_venv_with_its_plugin(wheel: Path, hermes_venv: Path, tmp_path: Path) -> None:
    python = hermes_venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", wheel, timeout=INSTALL_SECONDS)
    works(hermes_venv / "bin", tmp_path / "home")
    found = run(python, "-c", "import backchannel_hermes; print(backchannel_hermes.__file__)")
    assert Path(found.strip()).is_relative_to(hermes_venv)  # the wheel's plugin, not the checkout's

    hermes_home = tmp_path / "hermes"
    hermes_home.mkdir()
    (hermes_home / "config.yaml").write_text("model: {provider: custom}\n")
    env = {"BACKCHANNEL_HOME": str(tmp_path / "home"), "HERMES_HOME": str(hermes_home), "COLUMNS": "200"}
    run(hermes_venv / "bin" / "backchannel", "hermes", "connect", "default", env=env)
    listing = run(python, "-m", "hermes_cli.main", "plugins", "list", env=env)
    row = next(line for line in listing.splitlines() if "│ backchannel " in line)
    assert "enabled" in row and "not enabled" not in row, row
