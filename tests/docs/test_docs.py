"""The documentation runs: every page's code, every docstring example, and the API reference
covers every public name. (The site itself is built by `python3 dev.py docs`, strict.)"""

from __future__ import annotations

import doctest
import inspect
import pydoc
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from doc_blocks import RUNNABLE, blocks, page_options
from helpers import child_environment
from load_file import load_file, load_tool
from packaging.version import Version

import jax_dataclasses as jdc

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
STDLIB_ALIASES = {"asdict", "astuple", "field", "fields", "is_dataclass", "replace"}
OURS = sorted(set(jdc.__all__) - STDLIB_ALIASES)
README_MAX_LINES = 200


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
@pytest.mark.subprocess
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    """Each page's Python blocks run in order, in a fresh process, from an empty directory."""
    runnable = [b for b in blocks(page) if b.skip_reason is None and b.language in RUNNABLE]
    if not runnable:
        pytest.skip("no runnable blocks")
    options = page_options(page)
    if "min-jax" in options and Version(jax.__version__) < Version(options["min-jax"]):
        pytest.skip(f"the page needs jax>={options['min-jax']}")
    for module in filter(None, options.get("requires", "").split(",")):
        pytest.importorskip(module)
    devices = int(options.get("devices", "1"))
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "doc_blocks.py"), str(page)],
        cwd=tmp_path,
        env=child_environment(devices),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.subprocess
def test_unmarked_blocks_that_cannot_run_are_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Text\n\n```bash\npip install x\n```\n")
    with pytest.raises(ValueError, match=r"page\.md:3: a bash block must run"):
        blocks(page)
    page.write_text("<!-- skip: a shell command -->\n```bash\npip install x\n```\n")
    assert [b.skip_reason for b in blocks(page)] == ["a shell command"]


def write_and_run(page: Path, text: str) -> subprocess.CompletedProcess[str]:
    """Write a page and run its blocks as the docs tests do."""
    page.write_text(text)
    runner = [sys.executable, str(ROOT / "tests" / "doc_blocks.py"), str(page)]
    return subprocess.run(runner, capture_output=True, text=True, check=False)


@pytest.mark.subprocess
def test_a_failing_block_fails_with_the_page_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    result = write_and_run(
        page, "# Title\n\n- item\n\n  ```python\n  x = 1\n  assert x == 2\n  ```\n"
    )
    assert result.returncode != 0
    assert f'File "{page}", line 7' in result.stderr, result.stderr


@pytest.mark.subprocess
def test_output_blocks_must_be_what_the_block_before_printed(tmp_path: Path) -> None:
    code = "```python\nprint('Layer(w=f32[3])')\n```\n\n<!-- output -->\n```text\n{}\n```\n"
    assert write_and_run(tmp_path / "page.md", code.format("Layer(w=f32[3])")).returncode == 0
    result = write_and_run(tmp_path / "page.md", code.format("Layer(w=f32[4])"))
    assert "page.md:6: the output shown is not what the Python block before it printed" in (
        result.stderr
    ), result.stderr
    assert "-Layer(w=f32[4])\n+Layer(w=f32[3])" in result.stderr, result.stderr


@pytest.mark.subprocess
def test_output_must_follow_a_block_that_ran(tmp_path: Path) -> None:
    code = "```python\nprint('A')\n```\n\n<!-- skip: why -->\n```python\nprint('B')\n```\n\n"
    result = write_and_run(tmp_path / "page.md", code + "<!-- output -->\n```text\nA\n```\n")
    assert "page.md:11: <!-- output --> follows no Python block that ran" in result.stderr


@pytest.mark.subprocess
def test_output_keeps_its_indentation(tmp_path: Path) -> None:
    code = "```python\nprint('  a')\nprint('  b')\n```\n<!-- output -->\n```text\n  a\n  b\n```\n"
    result = write_and_run(tmp_path / "page.md", code)
    assert result.returncode == 0, result.stderr


@pytest.mark.subprocess
def test_longer_closing_fences_and_misspelt_options(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("````python\nx = 1\n`````\n\n<!-- docs-test: device=8 -->\n")
    assert [b.source for b in blocks(page)] == ["x = 1"]
    with pytest.raises(ValueError, match=r"unknown docs-test option\(s\) \['device'\]"):
        page_options(page)


@pytest.mark.subprocess
def test_pages_run_as_main(tmp_path: Path) -> None:
    code = "```python\nclass A: ...\nprint(A.__module__)\n```\n\n<!-- output -->\n```text\n__main__\n```\n"
    result = write_and_run(tmp_path / "page.md", code)
    assert result.returncode == 0, result.stderr


@pytest.mark.subprocess
def test_pages_run_without_our_future_imports(tmp_path: Path) -> None:
    result = write_and_run(
        # Evaluated: at once before Python 3.14, when read on 3.14; never under the import.
        tmp_path / "page.md",
        "```python\ndef f(x: Undefined) -> None: ...\n\nf.__annotations__\n```\n",
    )
    assert "NameError: name 'Undefined' is not defined" in result.stderr, result.stderr


INCLUDE = re.compile(r'^[ \t]*--8<--[ \t]+"(?P<target>[^"]+)"[ \t]*$')
"""A pymdownx.snippets include on one line: `--8<-- "path"` or `--8<-- "path:section"`."""
BLOCK = re.compile(r"^[ \t]*--8<--[ \t]*$")
"""The line that opens and closes a block of includes, one path per line: inside a ```python
block, the form `ruff format` leaves alone (it rewrites the one-line form, which is Python,
into `--8 < --"path"`)."""
MARKER = re.compile(r"-+[ \t]*8[ \t]*<[ \t]*-+")
"""The include marker however a formatter spaced it (`--8 < --"path"` is shown as text)."""
DOCS = sorted((ROOT / "docs").rglob("*.md"))


def includes(page: Path) -> tuple[list[tuple[Path, str | None]], list[str]]:
    """The files (and sections) a page includes, and what is wrong with its include lines: a
    marker spelt otherwise than pymdownx.snippets reads it (the page would show the text, and
    a strict build passes), a file that does not exist, a section the file does not mark."""
    found: list[tuple[Path, str | None]] = []
    problems: list[str] = []
    targets: list[tuple[int, str]] = []
    in_block = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if BLOCK.match(line):
            in_block = not in_block
        elif in_block:
            targets.append((number, line.strip()))
        elif MARKER.search(line) and not re.search(r"\[(start|end):[\w-]+\]", line):
            include = INCLUDE.match(line)  # (A section marker of an included file is none.)
            if include is None:
                problems.append(f"{page.name}:{number}: {line.strip()!r} is not an include")
            else:
                targets.append((number, include["target"]))
    for number, target in targets:
        name, _, section = target.partition(":")
        path, where = ROOT / name, f"{page.name}:{number}"
        if not path.is_file():
            problems.append(f"{where}: includes {name}, which does not exist")
        elif section and f"--8<-- [start:{section}]" not in path.read_text():
            problems.append(f"{where}: {name} marks no section {section!r}")
        else:
            found.append((path, section or None))
    return found, problems


def included_words(path: Path, section: str | None) -> list[str]:
    """The first words of an included file (or section) as a page shows them: Markdown's link
    targets, HTML comments, fences and markup dropped."""
    text = path.read_text()
    if section is not None:
        text = text.split(f"--8<-- [start:{section}]", 1)[1].split(f"--8<-- [end:{section}]")[0]
        text = text.split("-->", 1)[1]
    text = re.sub(r"<!--.*?-->|\]\([^)]*\)", " ", text, flags=re.S)
    text = re.sub(r"^[ \t]*(```|~~~).*$", " ", text, flags=re.M)
    return re.findall(r"\w+", text)[:12]


def test_every_include_in_the_docs_is_well_formed_and_resolves() -> None:
    problems = [problem for page in DOCS for problem in includes(page)[1]]
    assert not problems, "\n".join(problems)
    assert len([path for page in DOCS for path in includes(page)[0]]) >= 4  # The pages were read.


def test_a_mangled_missing_or_unmarked_include_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '```python\n--8 < --"examples/data_parallel.py"\n```\n--8<-- "examples/none.py"\n'
        '--8<-- "README.md:nowhere"\n--8<-- "README.md:intro"\n'
        "```python\n--8<--\nexamples/data_parallel.py\n--8<--\n```\n"
    )
    found, problems = includes(page)
    assert problems == [
        "page.md:2: '--8 < --\"examples/data_parallel.py\"' is not an include",
        "page.md:4: includes examples/none.py, which does not exist",
        "page.md:5: README.md marks no section 'nowhere'",
    ]
    assert found == [(ROOT / "README.md", "intro"), (ROOT / "examples/data_parallel.py", None)]


@pytest.mark.subprocess
def test_ruff_format_leaves_the_includes_alone(tmp_path: Path) -> None:
    """ruff formats the Python blocks of Markdown pages: the includes must survive it."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is installed by the dev extra")
    pages = [page for page in DOCS if includes(page)[0]]
    for page in pages:
        shutil.copy(page, tmp_path / page.name)
    subprocess.run([str(ruff), "format", "--quiet", str(tmp_path)], check=True, cwd=ROOT)
    for page in pages:
        assert includes(tmp_path / page.name) == includes(page), page.name
    mangled = tmp_path / "one_line.md"
    mangled.write_text('```python\n--8<-- "examples/data_parallel.py"\n```\n')
    subprocess.run([str(ruff), "format", "--quiet", str(mangled)], check=True, cwd=ROOT)
    assert includes(mangled)[1], "the one-line form in a python block: ruff rewrites it"


@pytest.mark.subprocess
def test_every_include_renders_the_included_text(site: Path) -> None:
    """The site's page shows the words the included file starts with."""
    for page in DOCS:
        html = site / page.relative_to(ROOT / "docs").with_suffix(".html")
        shown = " ".join(re.findall(r"\w+", pydoc_html_text(html.read_text())))
        for path, section in includes(page)[0]:
            words = " ".join(included_words(path, section))
            assert words and words in shown, f"{page.name} does not show {path.name}: {words!r}"


def pydoc_html_text(html: str) -> str:
    """The text of an HTML page: tags dropped, entities decoded."""
    import html as entities

    return entities.unescape(re.sub(r"<[^>]+>", " ", html))


def test_api_reference_lists_every_public_name() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    documented = re.findall(
        r"^::: jax_dataclasses(?:\._\w+(?:\.\w+)*)?\.(\w+)$", text, re.MULTILINE
    )
    assert sorted(documented) == sorted(jdc.__all__)


@pytest.mark.parametrize("name", OURS)
def test_public_docstrings_have_an_example_that_runs(name: str) -> None:
    obj = getattr(jdc, name)
    doc = inspect.getdoc(obj) or ""
    assert "Examples:" in doc and ">>>" in doc, f"jdc.{name} has no example in its docstring"
    tests = doctest.DocTestFinder(recurse=False).find(
        obj, f"jdc.{name}", globs={"jax": jax, "jnp": jnp, "jdc": jdc}
    )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_help_of_static_shows_our_docstring() -> None:
    text = pydoc.render_doc(jdc.Static)
    assert "Runtime representation" not in text
    assert "marks the value static" in text


DEV = load_file(ROOT / "dev.py")
SCREENSHOTS = load_tool("screenshots")


@pytest.mark.subprocess
def test_the_test_command_builds_the_site_strictly(tmp_path: Path) -> None:
    steps = dict(DEV.steps_for("test", tmp_path, []))
    assert list(steps)[-2:] == ["docs", "pytest"]  # CI runs `python3 dev.py test`
    assert steps["docs"][1:3] == ["build", "--strict"]


@pytest.mark.subprocess
def test_the_site_shows_our_docstrings_and_no_test_markers(site: Path) -> None:
    api = (site / "api.html").read_text()
    assert "marks the value static" in api  # jdc.Static's docstring, set at run time
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert not re.search(r"<!--\s*(skip:|output|docs-test:)", text), page


@pytest.mark.subprocess
def test_the_offline_check_finds_what_a_browser_would_fetch(tmp_path: Path) -> None:
    remote_fetches = load_file(ROOT / "docs" / "_build" / "offline_check.py").remote_fetches
    page = tmp_path / "page.html"
    page.write_text(
        '<a href="https://example.org">a link</a><link rel="canonical" href="https://x.org/">'
        "<p>url(https://in.text/)</p>"  # none of these is fetched
        '<script src="https://cdn.example/x.js"></script><link rel=preconnect href=//fonts.x>'
        '<img srcset="/local.png 1x, https://cdn.example/y.png 2x"><div class="mermaid"></div>'
        "<style>@import 'https://fonts.example/css';</style>"
    )
    found = remote_fetches(page)
    assert len(found) == 5, found
    style = tmp_path / "style.css"
    style.write_text("body { background: url('//cdn.example/bg.png') }")
    assert len(remote_fetches(style)) == 1


@pytest.mark.skipif(not SCREENSHOTS.CHROMIUM.exists(), reason="needs Debian's chromium package")
@pytest.mark.subprocess
def test_screenshots_show_rendered_pages(site: Path, tmp_path: Path) -> None:
    """`python3 dev.py screenshots` on the site: every page renders to a picture."""
    shots = tmp_path / "shots"
    assert SCREENSHOTS.take_screenshots(site, shots) == 0
    pictures = sorted(shots.glob("*.png"))
    assert len(pictures) == len(SCREENSHOTS.PAGES)
    for picture in pictures:  # A blank page compresses to a few kilobytes.
        assert picture.stat().st_size > 30_000, picture.name
    assert SCREENSHOTS.take_screenshots(tmp_path / "empty", shots) == 1  # no site: refused


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
