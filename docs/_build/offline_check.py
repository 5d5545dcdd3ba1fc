"""An mkdocs hook: fail the build if a page would fetch anything from the network when viewed.

The site must work offline (from the file system, or a machine with no network): no fonts,
scripts, stylesheets or images from other hosts. Links (`<a href>`) may point anywhere.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REMOTE = re.compile(
    r"""<(?:script|img|iframe)\b[^>]*\bsrc=["']?(?:https?:)?//"""
    r"""|<link\b[^>]*\bhref=["']?(?:https?:)?//[^>]*>"""
    r"""|url\(\s*["']?(?:https?:)?//"""
    r"""|@import\s+["'](?:https?:)?//""",
    re.IGNORECASE,
)


def on_post_build(config: Any, **kwargs: Any) -> None:
    site = Path(config["site_dir"])
    offenders = [
        f"{path.relative_to(site)}: {match.group(0)[:80]}"
        for path in sorted(site.rglob("*"))
        if path.suffix in {".html", ".css"}
        for match in REMOTE.finditer(path.read_text(errors="replace"))
    ]
    if offenders:
        raise RuntimeError("the site fetches from the network when viewed:\n" + "\n".join(offenders))
