"""Remake the pictures of the web view in docs/: the demo's tutorial on a kept home, then Debian's chromium (through
Playwright) logs in to home's gateway and takes, at 1280 px, the ledger filtered to a pair (ledger.png, the README's
picture), the overview, the runs and the demo's room (web-overview.png, web-runs.png, web-room.png).

    .venv/bin/python scripts/screenshot.py [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo import Demo, tutorial

from backchannel.home import config

ROOT = Path(__file__).resolve().parent.parent
PAGES = {  # each picture and the page it shows
    "ledger.png": "/web/ledger?address=research&address=builds",
    "web-overview.png": "/",
    "web-runs.png": "/web/runs",
    "web-room.png": "/web/rooms/standup",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="the folder the pictures go to")
    out = parser.parse_args().out
    chromium = shutil.which("chromium")
    if chromium is None:
        print("no chromium on PATH: run `make browser`", file=sys.stderr)
        return 1
    base = Path(tempfile.mkdtemp(prefix="backchannel-shot-"))
    demo = Demo(base)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            tutorial(demo)
        port = demo.gateways["home"][1]
        key = config.read_env(demo.homes["home"])[config.API_KEY_VAR]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 720}, color_scheme="light")
            page.goto(f"http://127.0.0.1:{port}/web/login")
            page.fill("#key", key)
            page.click("button[type=submit]")
            out.mkdir(parents=True, exist_ok=True)
            for name, path in PAGES.items():
                page.goto(f"http://127.0.0.1:{port}{path}")
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(out / name), full_page=True)
                print(f"wrote {out / name}")
            browser.close()
    finally:
        with contextlib.redirect_stdout(io.StringIO()):
            demo.stop_gateways()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
