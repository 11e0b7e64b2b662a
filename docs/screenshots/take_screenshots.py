"""Screenshots of the site at 1280 px wide, as a reader sees it: build the site, serve it on localhost, and have
headless Chromium (Debian's `chromium`) photograph each page into docs/screenshots/<page>.png.

    .venv/bin/python docs/screenshots/take_screenshots.py            # every page below
    .venv/bin/python docs/screenshots/take_screenshots.py tools      # one page

Each shot is the top `height` pixels of the page (scrolled to `anchor` where one is given): tall enough to show the
part a change touched (a table's columns, a tree's lines, a code block's commands) at the width a laptop shows it.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
WIDTH = 1280
# page -> (path in the site, anchor, height in px)
PAGES = {
    "tools": ("tools/", "", 2600),
    "data": ("data/", "", 2200),
    "layout": ("layout/", "", 2600),
    "faithfulness": ("faithfulness/", "", 2400),
    "training": ("training/", "", 2000),
    "rl-switches": ("rl-switches/", "", 3000),
    "quickstart": ("quickstart/", "", 2400),
}


def build(site: Path) -> None:
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site)], cwd=ROOT, check=True)


def shoot(browser: str, url: str, out: Path, height: int) -> None:
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{height}",
            "--virtual-time-budget=4000",  # let the theme's scripts settle before the shot
            f"--screenshot={out}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def main(names: list[str]) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("no chromium on PATH: apt-get install -y chromium")
    unknown = sorted(set(names) - set(PAGES))
    if unknown:
        sys.exit(f"unknown pages {unknown}; choose from {sorted(PAGES)}")
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        build(site)
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            for name in names or PAGES:
                path, anchor, height = PAGES[name]
                url = f"http://127.0.0.1:{server.server_port}/{path}" + (f"#{anchor}" if anchor else "")
                shoot(browser, url, OUT / f"{name}.png", height)
                print(f"{OUT / f'{name}.png'}: {url}")
        finally:
            server.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
