"""Screenshots at 1280 and 390 px and the overflow check of the browser tests: a page must not scroll sideways
(``document.documentElement.scrollWidth`` at most the viewport's width) at either width.

The screenshots go to ``$UNPOOLED_SCREENSHOTS`` (default: a ``unpooled-screenshots`` directory in the system's
temporary directory), named after the page, to be looked at."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

WIDTHS = (1280, 390)


def shots_dir() -> Path:
    d = Path(os.environ.get("UNPOOLED_SCREENSHOTS") or Path(tempfile.gettempdir()) / "unpooled-screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


def check_layout(page, name: str, *, full_page: bool = True) -> dict[int, int]:
    """Screenshot the current page at each width in :data:`WIDTHS` and assert it does not overflow sideways;
    returns {width: scrollWidth}.  The viewport is put back to 1280 x 800 afterwards."""
    widths = {}
    try:
        for w in WIDTHS:
            page.set_viewport_size({"width": w, "height": 800})
            page.wait_for_timeout(50)
            sw = page.evaluate("document.documentElement.scrollWidth")
            vw = page.evaluate("document.documentElement.clientWidth")
            page.screenshot(path=str(shots_dir() / f"{name}-{w}.png"), full_page=full_page)
            if full_page:  # the first screen too: a tall page's full shot is too small to read
                page.screenshot(path=str(shots_dir() / f"{name}-{w}-top.png"))
            widths[w] = sw
            assert sw <= vw, f"{name} at {w} px scrolls sideways: scrollWidth {sw} > {vw}"
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})
    return widths


def sign_in(page, base: str, username: str, password: str) -> None:
    """Sign in through the login form."""
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("#login")
