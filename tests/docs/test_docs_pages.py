"""What particular documentation pages show, beyond `tests/docs/test_docs.py`'s checks of every page.

- Blocks that need equinox. It is installed by the `dev` extra, not by `test`, so the
  oldest-versions run does not have it. Pages mark their equinox blocks
  `<!-- skip: equinox code ... -->` or `<!-- skip: needs equinox ... -->`, and
  `tests/docs/test_docs.py` runs the rest of the page everywhere; here, where equinox is
  installed, each such page runs again with those blocks.
- The equinox layers that the equinox migration page names, and what their leaves are.
- The API reference's signatures: the overloads type checkers see, not `-> Any`.
- The flax partitioning migration page: each spelling of nnx's stacked layers in its table,
  and in code that runs (the page's blocks, `tests/docs/test_docs.py`).
"""

from __future__ import annotations

import html
import inspect
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from doc_blocks import page_options
from helpers import child_environment

import jax_dataclasses as jdc

ROOT = Path(__file__).resolve().parents[2]
EQUINOX_SKIP = re.compile(
    r"^([ \t]*)<!--\s*skip:\s*(?:equinox code|needs equinox)\b.*?-->[ \t]*$", re.M
)
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if EQUINOX_SKIP.search(p.read_text()))


def test_the_pages_with_equinox_blocks_are_found() -> None:
    names = {page.name for page in PAGES}
    assert {"from-equinox.md", "frozen-parameters.md"} <= names, names


@pytest.mark.subprocess
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_equinox_blocks_run(page: Path, tmp_path: Path) -> None:
    """The page with its equinox blocks unmarked (the marker line left blank, so that line
    numbers stay those of the page) runs as `tests/docs/test_docs.py` runs pages."""
    pytest.importorskip("equinox")
    for module in filter(None, page_options(page).get("requires", "").split(",")):
        pytest.importorskip(module)
    copy = tmp_path / page.name
    copy.write_text(EQUINOX_SKIP.sub(r"\1", page.read_text()))
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "doc_blocks.py"), str(copy)],
        cwd=tmp_path,
        env=child_environment(int(page_options(page).get("devices", "1"))),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _non_array_leaves(layer: object) -> list[str]:
    import equinox as eqx

    return [
        jax.tree_util.keystr(path)
        for path, leaf in jax.tree_util.tree_leaves_with_path(layer)
        if not eqx.is_array(leaf)
    ]


def test_equinox_layers_hold_the_leaves_the_migration_page_says() -> None:
    """docs/migrating/from-equinox.md, "Equinox layers as fields": which layers have only
    arrays as leaves (so plain `jax.jit` takes them), and which keep Python values."""
    eqx = pytest.importorskip("equinox")
    key = jax.random.key(0)
    arrays_only = {
        "Linear": eqx.nn.Linear(3, 2, key=key),
        "Conv2d": eqx.nn.Conv2d(3, 2, 3, key=key),
        "Embedding": eqx.nn.Embedding(10, 3, key=key),
        "LayerNorm": eqx.nn.LayerNorm(3),
        "RMSNorm": eqx.nn.RMSNorm(3),
        "GRUCell": eqx.nn.GRUCell(3, 4, key=key),
        "LSTMCell": eqx.nn.LSTMCell(3, 4, key=key),
    }
    for name, layer in arrays_only.items():
        assert _non_array_leaves(layer) == [], name
    others = {
        "MLP": eqx.nn.MLP(3, 2, 8, 2, key=key),
        "Sequential": eqx.nn.Sequential([eqx.nn.Lambda(jax.nn.relu)]),
        "Dropout": eqx.nn.Dropout(0.1),
        "MultiheadAttention": eqx.nn.MultiheadAttention(2, 4, key=key),
        "BatchNorm": eqx.nn.BatchNorm(3, "batch", mode="batch"),
    }
    for name, layer in others.items():
        assert _non_array_leaves(layer) != [], name


@pytest.fixture(scope="module")
def api_page(site: Path) -> str:
    """The HTML of the API reference (`site`: tests/conftest.py)."""
    return (site / "api.html").read_text()


def _entry(page: str, name: str) -> str:
    """The text of the API page's entry for `jdc.<name>`, up to the next entry."""
    heading = re.compile(r'<h[23] id="jax_dataclasses\.(\w+)"')
    starts = {m[1]: m.start() for m in heading.finditer(page)}
    following = [start for start in starts.values() if start > starts[name]]
    text = page[starts[name] : min(following, default=len(page))]
    return html.unescape(re.sub(r"<[^>]+>", "", text))


@pytest.mark.subprocess
def test_the_api_reference_shows_the_signatures_type_checkers_see(api_page: str) -> None:
    dataclass = _entry(api_page, "pytree_dataclass")
    assert "-> type[T]" in dataclass and "-> Callable[[type[T]], type[T]]" in dataclass
    for keyword in inspect.signature(jdc.pytree_dataclass).parameters.values():
        if keyword.kind is inspect.Parameter.KEYWORD_ONLY:  # Each option, with its default.
            assert f"{keyword.name}: bool = {keyword.default!r}" in dataclass, keyword.name
    jit = _entry(api_page, "jit")
    assert "-> _F" in jit and "-> JitDecorator" in jit
    for entry in (dataclass, jit):
        shown, _, source = entry.partition("Source code in jax_dataclasses/")
        assert source, "the entry shows its source"
        assert "-> Any" not in shown  # the implementation's annotation: in its source only


@pytest.mark.subprocess
def test_the_api_reference_wraps_long_example_lines(api_page: str) -> None:
    """pformat's example is wider than the page: docs/stylesheets/extra.css wraps it."""
    assert 'href="stylesheets/extra.css"' in api_page
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    assert re.search(r"\.doc-contents pre > code[^{]*\{[^}]*white-space: pre-wrap", css)


@pytest.mark.parametrize(
    ("flax", "code"),
    [
        ('transform_metadata={nnx.PARTITION_NAME: "layers"}', 'jdc.Sharded[Kernel, "layers"]'),
        ("@nnx.scan(", "jax.lax.scan(body, x, self.layers)"),
        ("`spmd_axis_name`", "out_shardings=jdc.shardings(jax.eval_shape(init, key))"),
    ],
)
def test_the_flax_partitioning_page_maps_each_way_nnx_stacks_layers(flax: str, code: str) -> None:
    """Issue 38, item 9: the page showed only `PARTITION_NAME: None`."""
    page = (ROOT / "docs" / "migrating" / "from-flax-partitioning.md").read_text()
    assert flax in page and code in page
