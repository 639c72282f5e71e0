"""The web view's browser fixtures: one chromium per module (Debian's, driven by Playwright), a fresh browser
context per test that fails on any console error or warning and keeps a screenshot of a failing test
(conftest.py loads this module as a plugin, and holds the report hook `page` reads)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import GatewayProcess, api_key

CONSOLE_FAILS = ("error", "warning")


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        why = "no chromium on PATH: run `make browser` (it apt-get installs Debian's chromium)"
        if os.environ.get("BACKCHANNEL_REQUIRE_BROWSER"):  # `make test` (and so CI): a missing browser fails
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Console:
    """What the page said on its console, and the errors it threw."""

    messages: list[str] = field(default_factory=list)

    def bad(self) -> list[str]:
        return list(self.messages)


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    console = Console()
    tab.on("console", lambda m: console.messages.append(f"{m.type}: {m.text}") if m.type in CONSOLE_FAILS else None)
    tab.on("pageerror", lambda e: console.messages.append(f"page error: {e}"))
    try:
        yield tab
        failed = getattr(request.node, "report_call", None) is not None and request.node.report_call.failed
        if failed:
            shot = tmp_path / f"{request.node.name}.png"
            tab.screenshot(path=str(shot), full_page=True)
            print(f"screenshot of the failing page: {shot}")
        assert not console.bad(), f"the page wrote to its console: {console.bad()}"
    finally:
        context.close()


def log_in(tab: Any, gateway: GatewayProcess, path: str = "/") -> None:
    tab.goto(gateway.url + path)
    tab.fill("#key", api_key(gateway.root))
    tab.click("button[type=submit]")
    tab.wait_for_url(gateway.url + path)


def api(gateway: GatewayProcess) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, headers=gateway.headers(), timeout=30)
