"""An mkdocs hook: drop the comments that tell the docs tests how to run a page.

`<!-- skip: why -->`, `<!-- output -->` and `<!-- docs-test: ... -->` (see tests/doc_blocks.py)
are for the test suite; readers of the site have no use for them, even in the page source.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = re.compile(r"^[ \t]*<!--\s*(?:skip:|docs-test:|output\b)[^\n]*?-->[ \t]*\n", re.MULTILINE)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return MARKER.sub("", markdown)
