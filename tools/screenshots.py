"""`python3 dev.py screenshots`: pages of the built docs site as a reader sees them, as PNGs.

The site is served on localhost by a throwaway HTTP server (so pages load their styles and
scripts as they would online) and each page is rendered by headless Chromium, whose flags keep
it from reaching for the network: a page that needs the network shows up as unstyled text.
"""

from __future__ import annotations

import http.server
import subprocess
import tempfile
import threading
from functools import partial
from pathlib import Path

from tools.venvs import log

PAGES = ("index.html", "guides/model-surgery.html", "api.html")
CHROMIUM = Path("/usr/bin/chromium")  # Debian's chromium package.


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves the site without logging every request."""

    def log_message(self, format: str, *args: object) -> None:
        pass


def take_screenshots(site: Path, out: Path) -> int:
    """Render PAGES of the built `site` as PNGs in `out`: 0, or an exit code (saying why)
    when Chromium or a page is missing or a page did not render."""
    if not CHROMIUM.exists():
        log(f"{CHROMIUM} not found (Debian: apt install chromium)")
        return 1
    missing = [page for page in PAGES if not (site / page).is_file()]
    if missing:
        log(f"FAILED: {site} has no {', '.join(missing)} (build the site first)")
        return 1
    out.mkdir(exist_ok=True)
    handler = partial(_Quiet, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            return _screenshot_pages(server.server_address[1], out)
        finally:
            server.shutdown()


def _screenshot_pages(port: int, out: Path) -> int:
    """One Chromium run per page of PAGES, served on `port`."""
    for page in PAGES:
        png = out / (page.replace("/", "-").removesuffix(".html") + ".png")
        png.unlink(missing_ok=True)  # A stale picture must not pass for a new one.
        with tempfile.TemporaryDirectory() as profile:
            flags = [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                "--window-size=1280,1000", "--virtual-time-budget=5000",
                f"--user-data-dir={profile}",
            ]  # fmt: skip
            url = f"http://127.0.0.1:{port}/{page}"
            command = [str(CHROMIUM), *flags, f"--screenshot={png}", url]
            try:
                code = subprocess.call(command, stderr=subprocess.DEVNULL, timeout=120)
            except subprocess.TimeoutExpired:
                code = 124
        if code != 0 or not png.exists():
            log(f"FAILED: no screenshot of {page}")
            return code or 1
        log(f"saved {png}")
    return 0
