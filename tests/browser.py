"""A real browser for the page's tests and benchmark: the distribution's Chromium, headless,
driven by Playwright for Python (playwright-core's protocol, without Playwright's own browser
download, which needs a network: executable_path points at the system's Chromium).

Where Chromium or Playwright is missing the tests skip, saying how to install them; with
ATTNCLI_BROWSER_TESTS=required (as .ci/run sets it) they fail instead, so CI cannot skip them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REQUIRED = os.environ.get("ATTNCLI_BROWSER_TESTS") == "required"

# the flags a headless Chromium needs on a machine with no network and no GPU, run as root:
# no background connections (updates, sync, field trials) that would count as requests
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--metrics-recording-only", "--mute-audio"]


def chromium() -> str | None:
    """The Chromium to drive: ATTNCLI_CHROMIUM, else chromium or chromium-browser on PATH."""
    return os.environ.get("ATTNCLI_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable() -> str | None:
    """Why the browser tests cannot run here, with how to make them, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed: pip install -e '.[test]' (or pip install playwright)"
    if chromium() is None:
        return ("Chromium is not installed: apt-get install chromium (Debian and Ubuntu), or set ATTNCLI_CHROMIUM "
                "to a Chromium or Chrome binary")
    return None


def launch(playwright):
    return playwright.chromium.launch(executable_path=chromium(), args=ARGS, headless=True)


class Opened:
    """A page loaded from a file: the Playwright page, every URL it requested, and every
    error its script or its policy reported."""

    def __init__(self, context, path: Path, ready: bool = True):
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page = context.new_page()
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.url = Path(path).resolve().as_uri()
        self.page.goto(self.url)
        if ready:  # an attncli page says when its views are drawn
            self.page.wait_for_selector("body[data-ready=true]", timeout=30_000)

    def data(self) -> dict:
        return self.page.evaluate("window.attncli.data")

    def only_itself_requested(self) -> None:
        assert self.requests == [self.url], self.requests
        assert self.errors == [], self.errors


# a module's: Playwright's sync API holds an event loop in this thread while it runs, and the
# tests after the browser's (Dask's, textual's) must find none
@pytest.fixture(scope="module")
def browser():
    why = unavailable()
    if why:
        (pytest.fail if REQUIRED else pytest.skip)(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def open_page(browser):
    contexts = []

    def go(path: Path, width: int = 1280, height: int = 900, ready: bool = True) -> Opened:
        context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=True)
        context.set_default_timeout(10_000)
        contexts.append(context)
        return Opened(context, path, ready)

    yield go
    for context in contexts:
        context.close()
