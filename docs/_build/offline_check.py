"""An mkdocs hook: fail the build if a page would fetch anything from the network when viewed.

The site must work offline (from the file system, or a machine with no network): no fonts,
scripts, stylesheets, images or frames from other hosts. Links a reader follows (`<a href>`,
`<link rel="canonical">` and the like) may point anywhere. Diagrams (`class="mermaid"`) are
refused too: the theme would load their renderer from a CDN.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

REMOTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
CSS_REMOTE = re.compile(r"""url\(\s*["']?(?:https?:)?//|@import\s+["'](?:https?:)?//""", re.I)
FETCHED_ATTRIBUTES = ("src", "href", "poster", "data", "xlink:href")
LINK_RELATIONS = {"canonical", "alternate", "author", "license", "help", "next", "prev", "search"}
"""`<link rel=...>` values that only name a page; the browser does not fetch them."""


class _Fetches(HTMLParser):
    """The remote resources a browser would load to show one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self._in_style = tag == "style"
        if "mermaid" in values.get("class", "").split():
            self.found.append(f"<{tag} class=mermaid>")
        if tag == "a" or (tag == "link" and set(values.get("rel", "").split()) <= LINK_RELATIONS):
            return
        candidates = [values.get(name, "") for name in FETCHED_ATTRIBUTES]
        candidates += [part.split()[0] for part in values.get("srcset", "").split(",") if part.split()]
        self.found += [f"<{tag}> {url}" for url in candidates if REMOTE.match(url)]
        if CSS_REMOTE.search(values.get("style", "")):
            self.found.append(f"<{tag} style=...>")

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style and CSS_REMOTE.search(data):
            self.found.append("<style> " + data.strip()[:60])


def remote_fetches(path: Path) -> list[str]:
    """What the HTML page or stylesheet at `path` would load from another host."""
    text = path.read_text(errors="replace")
    if path.suffix == ".css":
        return [match.group(0) for match in CSS_REMOTE.finditer(text)]
    parser = _Fetches()
    parser.feed(text)
    return parser.found


def on_post_build(config: Any, **kwargs: Any) -> None:
    """Refuse the built site if any page or stylesheet would fetch from the network."""
    site = Path(config["site_dir"])
    offenders = [
        f"{path.relative_to(site)}: {found[:100]}"
        for path in sorted(site.rglob("*"))
        if path.suffix in {".html", ".css"}
        for found in remote_fetches(path)
    ]
    if offenders:
        raise RuntimeError("the site fetches from the network when viewed:\n" + "\n".join(offenders))
