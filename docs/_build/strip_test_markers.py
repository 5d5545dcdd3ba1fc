"""An mkdocs hook: drop the comments that tell the docs tests how to run a page.

`<!-- skip: why -->`, `<!-- output -->` and `<!-- docs-test: ... -->` (see tests/doc_blocks.py)
are for the test suite; readers of the site have no use for them, even in the page source.
They are removed from the rendered HTML, so text pasted in from other files (the README's
regions on the home page) loses them too.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = re.compile(r"<!--\s*(?:skip:|docs-test:|output\b)[^>]*?-->[ \t]*\n?")


def on_page_content(html: str, **kwargs: Any) -> str:
    """The page's HTML without the test markers."""
    return MARKER.sub("", html)
