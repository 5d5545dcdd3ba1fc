"""Find the code blocks of a Markdown page and run its Python blocks in order, as a reader would.

Our own extractor rather than a plugin (pytest-markdown-docs, mktestdocs): it is small, it
needs nothing installed, and it gives what the pages need. A page's blocks share one module
namespace (a guide builds on its earlier blocks); tracebacks point at the page's own lines;
fences indented inside lists count; and each page runs in a fresh process, so its classes and
JAX's device count (`<!-- docs-test: devices=8 -->`) are its own.

Conventions (HTML comments, invisible on GitHub and on the site):

- A `python` block runs. A block preceded by `<!-- skip: why -->` is a deliberate fragment
  and does not run; the reason is required.
- Page options, one per line: `<!-- docs-test: devices=8 -->` (run on 8 CPU devices),
  `<!-- docs-test: min-jax=0.6.0 -->` (skip on older jax), `<!-- docs-test: requires=optax -->`
  (skip where these comma-separated modules are not installed).
- A `text` block is output or a message, not code. Preceded by `<!-- output -->`, it must be
  exactly what the Python block before it printed (trailing spaces aside). Any other language
  (`bash`, `toml`, ...) must be marked `<!-- skip: why -->`, so no block is left out by
  accident.
- The page runs as `__main__`, as a reader's script would (classes print as `__main__.X`).

Run one page: `python tests/doc_blocks.py docs/guides/jit.md` (page options are applied by
`tests/docs/test_docs.py` only: `pytest tests/docs/test_docs.py -k sharding` runs a page as the suite does).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import io
import re
import sys
import textwrap
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>\S.*?)\s*-->\s*$")
OUTPUT = re.compile(r"^\s*<!--\s*output\s*-->\s*$")
PAGE_OPTION = re.compile(r"^<!--\s*docs-test:\s*(?P<key>[\w-]+)=(?P<value>\S+)\s*-->\s*$", re.M)
RUNNABLE = {"python", "py"}
TEXT = {"text"}
PAGE_OPTIONS = {"devices", "min-jax", "requires"}


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its (dedented) source and where it starts."""

    language: str
    source: str
    first_line: int  # 1-based line number of the first line of code, in the page
    skip_reason: str | None
    is_output: bool = False  # a `text` block marked <!-- output -->


def blocks(path: Path) -> list[Block]:
    """Every fenced block of the page; `ValueError` for an unmarked block that cannot run."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        language = opening["info"].lower()
        previous = next((line for line in reversed(lines[:index]) if line.strip()), "")
        skip = SKIP.match(previous)
        end = index + 1  # Closed by a fence of the same character, at least as long.
        while end < len(lines) and not _closes(lines[end].strip(), fence):
            end += 1
        if end == len(lines):
            raise ValueError(f"{path}:{index + 1}: the block opened here is never closed")
        body = "\n".join(line.removeprefix(indent) for line in lines[index + 1 : end])
        if language in RUNNABLE:
            body = textwrap.dedent(body)  # Output keeps its leading spaces.
        is_output = OUTPUT.match(previous) is not None
        if is_output and language not in TEXT:
            raise ValueError(f"{path}:{index + 1}: <!-- output --> marks a {language} block")
        block = Block(language, body, index + 2, skip["reason"] if skip else None, is_output)
        if block.skip_reason is None and language not in RUNNABLE | TEXT:
            raise ValueError(
                f"{path}:{index + 1}: a {language or 'plain'} block must run (```python), be "
                "output (```text), or be marked <!-- skip: why --> on the line before it"
            )
        found.append(block)
        index = end + 1
    return found


def _closes(line: str, fence: str) -> bool:
    return len(line) >= len(fence) and set(line) == {fence[0]}


def page_options(path: Path) -> dict[str, str]:
    """`<!-- docs-test: key=value -->` lines of the page (for example `devices=8`); `ValueError`
    for an unknown key, so that a misspelt option is not silently ignored."""
    options = {m["key"]: m["value"] for m in PAGE_OPTION.finditer(path.read_text())}
    unknown = set(options) - PAGE_OPTIONS
    if unknown:
        raise ValueError(f"{path}: unknown docs-test option(s) {sorted(unknown)}")
    return options


def run_page(path: Path) -> int:
    """Run the page's Python blocks in one fresh `__main__` module; return how many ran.

    `AssertionError` if a block marked `<!-- output -->` differs from what was printed.
    """
    module = types.ModuleType("__main__")
    module.__file__ = str(path)
    sys.modules["__main__"] = module
    ran, printed = 0, None  # What the last Python block printed; None if it did not run.
    for block in blocks(path):
        if block.is_output:
            _check_output(path, block, printed)
        if block.language in RUNNABLE and block.skip_reason is not None:
            printed = None
        if block.skip_reason is not None or block.language not in RUNNABLE:
            continue
        tree = ast.parse(block.source, filename=str(path))
        ast.increment_lineno(tree, block.first_line - 1)
        captured = io.StringIO()
        try:
            with contextlib.redirect_stdout(captured):
                # dont_inherit: run as a reader's script would, without our __future__ imports.
                exec(compile(tree, str(path), "exec", dont_inherit=True), module.__dict__)
        finally:
            printed = captured.getvalue()
            sys.stdout.write(printed)
        ran += 1
    return ran


def _check_output(path: Path, block: Block, printed: str | None) -> None:
    """`AssertionError` unless `block` is what the Python block before it printed."""

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.rstrip().splitlines()]

    if printed is None:
        raise AssertionError(
            f"{path}:{block.first_line - 1}: <!-- output --> follows no Python block that ran"
        )
    if lines(block.source) != lines(printed):
        diff = difflib.unified_diff(
            lines(block.source), lines(printed), "shown", "printed", lineterm=""
        )
        raise AssertionError(
            f"{path}:{block.first_line - 1}: the output shown is not what the Python block "
            "before it printed:\n" + "\n".join(diff)
        )


if __name__ == "__main__":
    # Pages import only what a reader has installed, not this directory's helpers. The page
    # options (devices, ...) are applied by tests/docs/test_docs.py, not here.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    # A deprecated API used by an example, or by the package, fails the page: readers copy it.
    for module in ("__main__", "jax_dataclasses"):
        warnings.filterwarnings("error", category=DeprecationWarning, module=module)
    for argument in sys.argv[1:]:
        print(f"{argument}: {run_page(Path(argument))} block(s) ran")


def anchors(page: Path) -> set[str]:
    """The anchors the documentation site gives a Markdown page's headings: Python-Markdown's
    `toc` extension, which mkdocs runs, with the fences of `mkdocs.yml` (headings inside code
    blocks are none)."""
    import markdown  # The docs' own dependency: only the anchor checks need it.

    converter = markdown.Markdown(extensions=["toc", "pymdownx.superfences", "attr_list"])
    converter.convert(page.read_text())

    def ids(tokens: list[dict[str, Any]]) -> Iterator[str]:
        for token in tokens:
            yield token["id"]
            yield from ids(token["children"])

    return set(ids(converter.toc_tokens))  # type: ignore[attr-defined]  # Set by the extension.
