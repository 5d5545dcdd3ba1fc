"""The design note's lists match the code: module layers, module-level state, writes to the
interpreter's shared state, the private APIs of other packages, and the mechanisms' places.

docs/design.md §12 lists the package's modules in layers (a module imports only modules of
lower layers), every object the code changes after import, every write to state the whole
interpreter shares, the private names of other packages the code uses, and where each
mechanism lives. These tests read the source (never importing it) and fail when the code and
the note disagree, so neither can drift: a new registry, cache, lock, import direction or
private API has to be written down, with its reason. The checker is tested too: each kind of
violation, planted in a copy of the package (or of the note), must be reported.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jax_dataclasses"
DESIGN = ROOT / "docs" / "design.md"
MUTABLE_CALLS = {
    "dict", "set", "list", "bytearray", "ContextVar", "Lock", "RLock", "defaultdict",
    "OrderedDict", "deque", "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "count",
    "local",
}  # fmt: skip
MUTABLE_DISPLAYS = (ast.Dict, ast.Set, ast.List, ast.DictComp, ast.SetComp, ast.ListComp)
CACHE_DECORATORS = {"lru_cache", "cache", "cached_property"}
SHARED_WRITES = {
    "sys.meta_path", "sys.path", "sys.modules", "sys.path_hooks", "warnings.filterwarnings",
    "warnings.simplefilter", "linecache.cache", "atexit.register", "os.environ",
    "signal.signal", "sys.setrecursionlimit",
}  # fmt: skip
"""Interpreter-wide state: a call of one of these, or a write into one, changes it for all."""
MUTATORS = {"append", "insert", "extend", "pop", "remove", "update", "setdefault", "clear"}


def modules(package: Path = PACKAGE) -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(package.glob("*.py"))}


def section(title: str, design: Path = DESIGN) -> str:
    """The text of the design note's subsection `### title`, up to the next heading."""
    text = design.read_text()
    match = re.search(rf"^### {re.escape(title)}\n(.*?)^#", text, re.DOTALL | re.MULTILINE)
    assert match, f"docs/design.md has no '### {title}' subsection"
    return match.group(1)


def imported_modules(tree: ast.Module, names: set[str]) -> set[str]:
    """The package modules a module imports, at the top or inside functions, however spelled:
    absolutely, relatively, the package itself (`__init__`), or by name at run time
    (`importlib.import_module`, `__import__`: reported as `<dynamic>`). `names`: the package's
    modules; `<outside>` for a relative import that leaves the package."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level > 1:
                found.add("<outside>")
                continue
            base = node.module or ""
            if node.level == 1:
                base = f"jax_dataclasses.{base}".rstrip(".")
            if base == "jax_dataclasses":  # `from jax_dataclasses import X`: a module or a name.
                found.update(a.name if a.name in names else "__init__" for a in node.names)
            elif base.startswith("jax_dataclasses."):
                found.add(base.removeprefix("jax_dataclasses.").partition(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "jax_dataclasses":
                    found.add("__init__")
                elif alias.name.startswith("jax_dataclasses."):
                    found.add(alias.name.removeprefix("jax_dataclasses.").partition(".")[0])
        elif isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if name in ("import_module", "__import__") and node.args:
                target = _constant(tree, node.args[0])
                if target is None or target.startswith(("jax_dataclasses", ".")):
                    found.add("<dynamic>")  # Ours, or cannot tell.
    return found


def _constant(tree: ast.Module, value: ast.expr) -> str | None:
    """A string literal, or the module-level string constant a name is bound to; else None."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if isinstance(value, ast.Name):
        for target, bound in _bindings(tree.body):
            if target == value.id and isinstance(bound, ast.Constant):
                return bound.value if isinstance(bound.value, str) else None
    return None


def layer_violations(package: Path = PACKAGE) -> list[str]:
    layers: dict[str, int] = {}
    for line in section("Layers").splitlines():
        match = re.match(r"^(\d+)\. (.*)$", line)
        if match:
            for module in re.findall(r"`([\w.]+)`", match.group(2)):
                layers[module] = int(match.group(1))
    found = modules(package)
    problems = (
        [] if set(layers) == set(found) else ["the layers list every module, and only modules"]
    )
    for name, tree in found.items():
        for imported in sorted(imported_modules(tree, set(found))):
            if imported not in layers:
                problems.append(f"{name} imports {imported}")
            elif layers[imported] >= layers.get(name, 0):
                problems.append(
                    f"{name} (layer {layers.get(name)}) imports {imported} (layer {layers[imported]})"
                )
    return problems


def _is_mutable(value: ast.expr) -> bool:
    call = value.func if isinstance(value, ast.Call) else None
    called = call.id if isinstance(call, ast.Name) else getattr(call, "attr", None)
    return isinstance(value, MUTABLE_DISPLAYS) or called in MUTABLE_CALLS


def _bindings(body: list[ast.stmt]) -> Iterator[tuple[str, ast.expr]]:
    for node in body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield ast.unparse(target), node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            yield ast.unparse(node.target), node.value


def mutable_state(name: str, tree: ast.Module) -> set[str]:
    """`module.NAME` for each module-level binding to a mutable object, each class attribute
    bound to one (`module.Class.NAME`), each name a function rebinds with `global`, each
    function that caches (`lru_cache`, `cache`) and each mutable default argument
    (`module.function.argument`)."""
    found = {f"{name}.{target}" for target, value in _bindings(tree.body) if _is_mutable(value)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.update(f"{name}.{global_name}" for global_name in node.names)
        elif isinstance(node, ast.ClassDef):
            found.update(
                f"{name}.{node.name}.{target}"
                for target, value in _bindings(node.body)
                if _is_mutable(value) and target != "__slots__"
            )
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                called = decorator.func if isinstance(decorator, ast.Call) else decorator
                label = (
                    called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
                )
                if label in CACHE_DECORATORS:
                    found.add(f"{name}.{node.name}")
            arguments = node.args
            defaults = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
            if any(_is_mutable(default) for default in defaults):
                found.add(f"{name}.{node.name}")
    return found - {f"{name}.__all__"}  # The export list: a convention, never changed.


def state_differences(package: Path = PACKAGE) -> tuple[set[str], set[str]]:
    """(found but not listed, listed but not found)."""
    listed = set(re.findall(r"`(_?[\w]+\.[\w.]+)`", section("Module-level state")))
    found = set().union(*(mutable_state(name, tree) for name, tree in modules(package).items()))
    return found - listed, listed - found


def shared_writes(tree: ast.Module) -> set[str]:
    """The interpreter-wide state (SHARED_WRITES) a module calls into or writes."""
    found: set[str] = set()
    for node in ast.walk(tree):
        target: ast.expr | None = None
        if isinstance(node, ast.Call):
            called = node.func
            if ast.unparse(called) in SHARED_WRITES:  # `warnings.filterwarnings(...)`
                found.add(ast.unparse(called))
            elif isinstance(called, ast.Attribute) and called.attr in MUTATORS:
                target = called.value  # `sys.meta_path.insert(...)`
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            target = targets[0]
        while isinstance(target, ast.Subscript | ast.Attribute):
            text = ast.unparse(target)
            if text in SHARED_WRITES:
                found.add(text)
                break
            target = target.value
    return found


def shared_write_differences(package: Path = PACKAGE) -> tuple[set[str], set[str]]:
    """(written but not listed, listed but not written)."""
    listed = {name for name in SHARED_WRITES if f"`{name}`" in section("Interpreter-wide writes")}
    found = set().union(*(shared_writes(tree) for tree in modules(package).values()))
    return found - listed, listed - found


def test_modules_import_only_lower_layers() -> None:
    wrong = layer_violations()
    assert not wrong, "imports against the layers of docs/design.md:\n" + "\n".join(wrong)


def test_module_level_state_is_the_design_notes_list() -> None:
    unlisted, missing = state_differences()
    assert not unlisted and not missing, (
        f"changed after import but not in docs/design.md: {sorted(unlisted)}; "
        f"listed but not found (or a constant of a mutable type): {sorted(missing)}"
    )


def test_interpreter_wide_writes_are_the_design_notes_list() -> None:
    unlisted, missing = shared_write_differences()
    assert not unlisted and not missing, (
        f"interpreter-wide state written but not in docs/design.md: {sorted(unlisted)}; "
        f"listed but not written: {sorted(missing)}"
    )


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(tree: ast.Module) -> set[str]:
    """The private names of other packages a module uses, at the top or inside functions:
    what it imports from a private module or under a private name (`jax._src.export._export`,
    `from x import _y`), and a private attribute of a module it imported (`sys._getframe`,
    `getattr(dataclasses, "_FIELD_INITVAR")`)."""
    bound: dict[str, str] = {}  # Local name -> module, for `import x` / `import x.y as z`.
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            private_module = any(map(_private, node.module.split(".")))
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if not node.module.startswith("jax_dataclasses")
                and (private_module or _private(alias.name))
            )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, name = node.value.id, node.attr
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            owner, name = node.args[0].id, node.args[1].value
        else:
            continue
        if owner in bound and _private(name):
            found.add(f"{bound[owner]}.{name}")
    return found


def unlisted_private_uses(package: Path = PACKAGE, design: Path = DESIGN) -> set[str]:
    """Private names used by the package that the design note's list does not name."""
    rows = [
        line
        for line in section("Private APIs we depend on", design).splitlines()
        if line[:2] == "| "
    ]
    listed = {name for row in rows for name in re.findall(r"`([\w.]+)`", row)}
    return {use for tree in modules(package).values() for use in private_uses(tree)} - listed


def test_private_apis_are_the_design_notes_list() -> None:
    unlisted = unlisted_private_uses()
    assert not unlisted, f"private APIs used but not in docs/design.md: {sorted(unlisted)}"


# Each planted into a copy of the package: (module, code appended, what must report it).
PLANTED = {
    "relative import of a higher layer": ("_core.codegen", "from ._builder import adopt", "layer"),
    "relative import out of the package": ("_core.codegen", "from .. import something", "layer"),
    "the package itself, inside it": ("_core.record", "import jax_dataclasses", "layer"),
    "a module imported by name": (
        "_core.codegen",
        "import importlib\n_late = importlib.import_module('jax_dataclasses._core.builder')",
        "layer",
    ),
    "a class-level set": ("_core.frozen", "class _Seen:\n    objects = set()", "state"),
    "an lru_cache": (
        "_tree_api",
        "import functools\n@functools.lru_cache\ndef _cached(x):\n    return x",
        "state",
    ),
    "a mutable default argument": (
        "_core.printing",
        "def _collect(into=[]):\n    return into",
        "state",
    ),
    "a thread-local": ("_core.codegen", "import threading\n_local = threading.local()", "state"),
    "warnings filtered at import": (
        "_core.static_values",
        "import warnings\nwarnings.filterwarnings('ignore')",
        "writes",
    ),
    "sys.path changed": ("_core.codegen", "sys.path.append('elsewhere')", "writes"),
    "a private module imported": ("_tree_api", "from jax._src import core", "private"),
    "a private attribute of a module": (
        "_core.builder",
        "_MISSING = dataclasses._MISSING_TYPE",
        "private",
    ),
    "a mechanism in a module that does not exist": (
        "<design>",
        "| 99 | a mechanism | `_no_such_module.helper` | nothing |",
        "mechanisms",
    ),
}


@pytest.mark.parametrize("planted", PLANTED, ids=list(PLANTED))
def test_the_checker_reports_a_planted_violation(planted: str, tmp_path: Path) -> None:
    module, code, check = PLANTED[planted]
    copy = tmp_path / "jax_dataclasses"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    design = tmp_path / "design.md"
    design.write_text(DESIGN.read_text())
    report = {
        "layer": lambda: bool(layer_violations(copy)),
        "state": lambda: state_differences(copy)[0] != set(),
        "writes": lambda: shared_write_differences(copy)[0] != set(),
        "private": lambda: bool(unlisted_private_uses(copy, design)),
        "mechanisms": lambda: bool(misplaced_mechanisms(copy, design)),
    }
    assert not any(found() for found in report.values())  # The copy is clean before.
    if module == "<design>":  # A row added to the mechanism table.
        text = design.read_text()
        table = text.index("| 1 | one builder")
        design.write_text(text[:table] + code + "\n" + text[table:])
    else:
        path = copy / f"{module}.py"
        path.write_text(path.read_text() + "\n\n" + code + "\n")
    assert report[check](), f"the checker missed: {planted}"


def mechanism_places(design: Path = DESIGN) -> list[str]:
    """Each module (`_module`, or the module of `_module.name`) that the mechanism table's
    "where" column names. Only the module is checked: a name inside it may move while the
    behaviour holds (the table says where; a review checks it)."""
    places: list[str] = []
    for line in section("Mechanisms", design).splitlines():
        cells = line.split(" | ")
        if len(cells) >= 4 and cells[0].startswith("| ") and cells[0][2:].strip().isdigit():
            places += re.findall(r"`(_\w+)(?:\.\w+)?`", cells[2])
    return places


def misplaced_mechanisms(package: Path = PACKAGE, design: Path = DESIGN) -> list[str]:
    """The modules the mechanism table names that the package does not have."""
    found = modules(package)
    return [place for place in mechanism_places(design) if place not in found]


def test_every_mechanism_is_where_the_design_note_says() -> None:
    assert len(mechanism_places()) >= 26  # The table was read.
    missing = misplaced_mechanisms()
    assert not missing, f"the mechanism table names modules the package does not have: {missing}"


def test_no_module_is_over_600_lines() -> None:
    """A module holds one concept whole; past 600 lines it holds two (design §12)."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in sorted(PACKAGE.glob("*.py"))}
    assert not {name: n for name, n in sizes.items() if n > 600}
