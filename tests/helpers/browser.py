"""Headless Chromium for `inspo view`'s tests: Debian's package, driven by Playwright. Skipped where either is
missing, unless INSPO_REQUIRE_BROWSER=1 (CI sets it: there a missing browser fails)."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

import pytest


def chromium_path() -> str | None:
    names = ("chromium", "chromium-headless-shell", "chromium-browser")
    return next((p for name in names if (p := shutil.which(name))), None)


@contextmanager
def chromium():
    """A launched browser, or the test skipped (failed under INSPO_REQUIRE_BROWSER=1) saying what is missing."""
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed (pip install playwright)"
    if why is None and chromium_path() is None:
        why = "no Chromium (apt-get install chromium)"
    if why is not None:
        if os.environ.get("INSPO_REQUIRE_BROWSER") == "1":
            pytest.fail(f"INSPO_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def visible(page, selector: str) -> list[dict]:
    """The data attributes of the elements `selector` finds that a filter has not hidden."""
    return page.eval_on_selector_all(selector, "els => els.filter(e => !e.hidden).map(e => ({...e.dataset}))")
