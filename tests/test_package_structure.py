"""The design note's lists match the code: module layers, and module-level state.

docs/design.md §12 lists the package's modules in layers (a module imports only modules of
lower layers) and every module-level object the code changes after import. These tests read
the source (never importing it) and fail when the code and the note disagree, so neither can
drift: a new registry, lock or import direction has to be written down, with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jax_dataclasses"
DESIGN = ROOT / "docs" / "design.md"
MUTABLE_CALLS = {
    "dict", "set", "list", "bytearray", "ContextVar", "Lock", "RLock", "defaultdict",
    "OrderedDict", "deque", "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "count",
}  # fmt: skip
MUTABLE_DISPLAYS = (ast.Dict, ast.Set, ast.List, ast.DictComp, ast.SetComp, ast.ListComp)


def modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(PACKAGE.glob("*.py"))}


def section(title: str) -> str:
    """The text of the design note's subsection `### title`, up to the next heading."""
    text = DESIGN.read_text()
    match = re.search(rf"^### {re.escape(title)}\n(.*?)^#", text, re.DOTALL | re.MULTILINE)
    assert match, f"docs/design.md has no '### {title}' subsection"
    return match.group(1)


def imported_modules(tree: ast.Module) -> set[str]:
    """The package modules a module imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("jax_dataclasses."):
                found.add(node.module.removeprefix("jax_dataclasses."))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("jax_dataclasses."):
                    found.add(alias.name.removeprefix("jax_dataclasses."))
    return found


def mutable_state(name: str, tree: ast.Module) -> set[str]:
    """`module.NAME` for each module-level binding to a mutable object, and each name a
    function rebinds with `global`."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        call = value.func if isinstance(value, ast.Call) else None
        called = call.id if isinstance(call, ast.Name) else getattr(call, "attr", None)
        if isinstance(value, MUTABLE_DISPLAYS) or called in MUTABLE_CALLS:
            found.update(f"{name}.{ast.unparse(target)}" for target in targets)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.update(f"{name}.{global_name}" for global_name in node.names)
    return found - {f"{name}.__all__"}  # The export list: a convention, never changed.


def test_modules_import_only_lower_layers() -> None:
    layers: dict[str, int] = {}
    for line in section("Layers").splitlines():
        match = re.match(r"^(\d+)\. (.*)$", line)
        if match:
            for module in re.findall(r"`([\w.]+)`", match.group(2)):
                layers[module] = int(match.group(1))
    found = modules()
    assert set(layers) == set(found), "the layers list every module, and only modules"
    wrong = [
        f"{name} (layer {layers[name]}) imports {imported} (layer {layers[imported]})"
        for name, tree in found.items()
        for imported in sorted(imported_modules(tree))
        if layers[imported] >= layers[name]
    ]
    assert not wrong, "imports against the layers of docs/design.md:\n" + "\n".join(wrong)


def test_module_level_state_is_the_design_notes_list() -> None:
    listed = set(re.findall(r"`(_?[\w]+\.[\w]+)`", section("Module-level state")))
    found = set().union(*(mutable_state(name, tree) for name, tree in modules().items()))
    assert found == listed, (
        f"changed after import but not in docs/design.md: {sorted(found - listed)}; "
        f"listed but not found (or a constant of a mutable type): {sorted(listed - found)}"
    )
