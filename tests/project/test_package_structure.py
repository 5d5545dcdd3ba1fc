"""The design notes' lists match the code: the folders' dependency rules, module-level state,
writes to the interpreter's shared state, the private APIs of other packages, and the
mechanisms' places.

docs/design.md's folders table lists the package's folders (and flat modules) with the folders
each may import (no module imports in a cycle, either); docs/design/audit.md lists every object
the code changes after import, every write to state the whole interpreter shares and the module
that makes it, the private names of other packages the code uses, and where each mechanism
lives. Modules are named by
their dotted path in the package (`_core.record`; a folder's `__init__` by the folder's name). These tests read the source (never importing it) and fail when the code and
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
from helpers import run_python

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jax_dataclasses"
DESIGN = ROOT / "docs" / "design.md"
AUDIT = ROOT / "docs" / "design" / "audit.md"
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


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """`_core.record` for `_core/record.py`, `_core` for `_core/__init__.py`, `__init__` for the
    package's own."""
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def modules(package: Path = PACKAGE) -> dict[str, ast.Module]:
    return {
        module_name(path, package): ast.parse(path.read_text())
        for path in sorted(package.rglob("*.py"))
    }


def folder(module: str) -> str:
    """The folder a module is in, or the flat module itself (`_jit`, `__init__`)."""
    return module.partition(".")[0]


def section(title: str, note: Path) -> str:
    """The text of a design note's section `## title`, up to the next heading or the end."""
    text = note.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^#|\Z)", text, re.DOTALL | re.MULTILINE)
    assert match, f"{note.name} has no '## {title}' section"
    return match.group(1)


def imported_modules(tree: ast.Module, names: set[str], name: str = "__init__") -> set[str]:
    """The package modules a module imports, at the top or inside functions, however spelled:
    absolutely, relatively, the package itself (`__init__`), or by name at run time
    (`importlib.import_module`, `__import__`: reported as `<dynamic>`). `names`: the package's
    modules; `name`: the importing module's (relative imports start from its folder);
    `<outside>` for a relative import that leaves the package. A path that is no module (an
    old, moved one) is reported as it is written."""
    found: set[str] = set()
    inside = name.split(".")[:-1] if "." in name else [name] if _is_folder(name, names) else []
    here = ["jax_dataclasses", *inside]  # The package the module is in.

    def module(dotted: str) -> str:
        """The module of `jax_dataclasses.a.b` (`a.b`), or `__init__` for the package."""
        inside = dotted.removeprefix("jax_dataclasses").removeprefix(".")
        return inside or "__init__"

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level > len(here):
                found.add("<outside>")
                continue
            start = here[: len(here) - node.level + 1] if node.level else []
            base = ".".join([*start, *filter(None, [node.module])])
            if base == "jax_dataclasses" or base.startswith("jax_dataclasses."):
                for alias in node.names:  # `from a import b`: a module b, or a name in a.
                    inner = f"{module(base)}.{alias.name}".removeprefix("__init__.")
                    found.add(inner if inner in names else module(base))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "jax_dataclasses" or alias.name.startswith("jax_dataclasses."):
                    found.add(module(alias.name))
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


def _is_folder(name: str, names: set[str]) -> bool:
    return any(other.startswith(f"{name}.") for other in names)


def folder_rules(design: Path = DESIGN) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """The design note's folders table (folder or flat module -> the folders and flat modules
    it may import), and its exceptions: (module, module it imports) pairs still to remove."""
    rules: dict[str, set[str]] = {}
    exceptions: set[tuple[str, str]] = set()
    for line in section("Folders", design).splitlines():
        cells = line.split(" | ")
        if len(cells) == 3 and re.fullmatch(r"\| `[\w.]+`", cells[0]):
            rules[cells[0][3:-1]] = set(re.findall(r"`([\w.]+)`", cells[2]))
        match = re.match(r"^- `([\w.]+)` imports `([\w.<>]+)`", line)
        if match:
            exceptions.add((match.group(1), match.group(2)))
    return rules, exceptions


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the import graph, or []."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for target in sorted(graph.get(node, ())):
            if cycle := visit(target, [*path, node]):
                return cycle
        done.add(node)
        return []

    return next((cycle for node in sorted(graph) if (cycle := visit(node, []))), [])


def layer_violations(package: Path = PACKAGE, design: Path = DESIGN) -> list[str]:
    """Imports against the folders' rules, imports in a cycle, and a table that does not list
    every folder and flat module (and only those)."""
    rules, exceptions = folder_rules(design)
    found = modules(package)
    units = {folder(name) for name in found}
    problems = [] if set(rules) == units else [f"the folders table lists {sorted(units)}"]
    graph = {name: imported_modules(tree, set(found), name) for name, tree in found.items()}
    for name, imports in sorted(graph.items()):
        for imported in sorted(imports):
            allowed = folder(imported) in {folder(name), *rules.get(folder(name), ())}
            if (name, imported) in exceptions or (name, imported) == ("__init__", "<dynamic>"):
                continue  # The package's `__init__` may import any module, by name too.
            if imported not in found:
                problems.append(f"{name} imports {imported}, no module of the package")
            elif not allowed:
                problems.append(f"{name} imports {imported}: not in {folder(name)}'s rule")
    if cycle := _cycle(graph):
        problems.append("imports in a cycle: " + " -> ".join(cycle))
    listed = {pair for pair in exceptions if pair[1] in graph.get(pair[0], ())}
    problems += [f"{a} no longer imports {b}: drop the exception" for a, b in exceptions - listed]
    return problems


def _is_mutable(value: ast.expr) -> bool:
    call = value.func if isinstance(value, ast.Call) else None
    called = call.id if isinstance(call, ast.Name) else getattr(call, "attr", None)
    return isinstance(value, MUTABLE_DISPLAYS) or called in MUTABLE_CALLS


def _mutable_annotation(annotation: ast.expr) -> bool:
    outer = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return getattr(outer, "id", None) in MUTABLE_CALLS


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
    found.update(  # `X: set[type] = Cache(...)`: its annotation says what it is.
        f"{name}.{ast.unparse(node.target)}"
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and _mutable_annotation(node.annotation)
    )
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
    listed = set(re.findall(r"`(_?[\w]+\.[\w.]+)`", section("Module-level state", AUDIT)))
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


def shared_write_differences(
    package: Path = PACKAGE,
) -> tuple[set[tuple[str, str]], set[str]]:
    """((module, write) made but not listed, writes listed but made nowhere). A write is listed
    for a module when one entry of the list names both (`sys.meta_path` ... `_compat.moved`)."""
    found = modules(package)
    made = {(name, write) for name, tree in found.items() for write in shared_writes(tree)}
    entries = re.split(r"^- ", section("Interpreter-wide writes", AUDIT), flags=re.MULTILINE)
    listed: set[tuple[str, str]] = set()
    for entry in entries:
        named = re.findall(r"`([\w.]+)`", entry)
        places = {n for n in named if n in found or n.rpartition(".")[0] in found}
        places |= {n.rpartition(".")[0] for n in places if n not in found}
        listed |= {(place, w) for w in SHARED_WRITES if w in named for place in places}
    listed_writes = {write for _, write in listed}
    return made - listed, listed_writes - {write for _, write in made}


def test_imports_follow_the_folders_rules() -> None:
    wrong = layer_violations()
    assert not wrong, "imports against the folders of docs/design.md:\n" + "\n".join(wrong)


def test_module_level_state_is_the_design_notes_list() -> None:
    unlisted, missing = state_differences()
    assert not unlisted and not missing, (
        f"changed after import but not in docs/design/audit.md: {sorted(unlisted)}; "
        f"listed but not found (or a constant of a mutable type): {sorted(missing)}"
    )


def test_interpreter_wide_writes_are_the_design_notes_list() -> None:
    unlisted, missing = shared_write_differences()
    assert not unlisted and not missing, (
        f"interpreter-wide state written but not in docs/design/audit.md: {sorted(unlisted)}; "
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


def unlisted_private_uses(package: Path = PACKAGE, audit: Path = AUDIT) -> set[str]:
    """Private names used by the package that the audit's list does not name."""
    rows = [
        line
        for line in section("Private APIs we depend on", audit).splitlines()
        if line[:2] == "| "
    ]
    listed = {name for row in rows for name in re.findall(r"`([\w.]+)`", row)}
    return {use for tree in modules(package).values() for use in private_uses(tree)} - listed


def test_private_apis_are_the_design_notes_list() -> None:
    unlisted = unlisted_private_uses()
    assert not unlisted, f"private APIs used but not in docs/design/audit.md: {sorted(unlisted)}"


# Each planted into a copy of the package: (module, code appended, what must report it).
PLANTED = {
    "relative import making a cycle": ("_core.codegen", "from .builder import adopt", "layer"),
    "relative import out of the package": ("_core.codegen", "from ... import something", "layer"),
    "the core importing a feature": (
        "_core.builder",
        "from jax_dataclasses._sharding_layouts.rules import parse_rules",
        "layer",
    ),
    "the declarations importing the core": (
        "_field_declarations.forms",
        "from jax_dataclasses._core.defaults import hide_array_defaults",
        "layer",
    ),
    "a feature importing another": ("_training", "from ._diagnostics import explain", "layer"),
    "an old, moved path": (
        "_jit",
        "from jax_dataclasses._record import Layout",  # house_rewrite: keep (the old path)
        "layer",
    ),
    "the package itself, inside it": ("_core.record", "import jax_dataclasses", "layer"),
    "a module imported by name": (
        "_core.codegen",
        "import importlib\n_late = importlib.import_module('jax_dataclasses._core.builder')",
        "layer",
    ),
    "a module imported by name, in a folder's __init__": (
        "_core",
        "import importlib\n_late = importlib.import_module('jax_dataclasses._jit')",
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
    "a finder installed by another module": (
        "_jit",
        "import sys\nsys.meta_path.insert(0, object())",
        "writes",
    ),
    "a private module imported": ("_tree_api", "from jax._src import core", "private"),
    "a private attribute of a module": (
        "_core.builder",
        "_MISSING = dataclasses._MISSING_TYPE",
        "private",
    ),
    "an entry function the folder does not have": (
        "<design>",
        "`explain.jit_diff` -> `explain.no_such_function`",
        "map",
    ),
    "a feature in a module that does not define it": (
        "<design>",
        "| `_diagnostics.explain`, `_diagnostics.recompiles` | -> | `_training` |",
        "map",
    ),
    "a mechanism in a module that does not exist": (
        "<audit>",
        "| 99 | a mechanism | `_no_such_module.helper` | nothing |",
        "mechanisms",
    ),
}


@pytest.mark.parametrize("planted", PLANTED, ids=list(PLANTED))
def test_the_checker_reports_a_planted_violation(planted: str, tmp_path: Path) -> None:
    module, code, check = PLANTED[planted]
    copy = tmp_path / "jax_dataclasses"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    audit = tmp_path / "audit.md"
    audit.write_text(AUDIT.read_text())
    design = tmp_path / "design.md"
    design.write_text(DESIGN.read_text())
    report = {
        "layer": lambda: bool(layer_violations(copy)),
        "state": lambda: state_differences(copy)[0] != set(),
        "writes": lambda: shared_write_differences(copy)[0] != set(),
        "private": lambda: bool(unlisted_private_uses(copy, audit)),
        "mechanisms": lambda: bool(misplaced_mechanisms(copy, audit)),
        "map": lambda: bool(map_problems(copy, design)),
    }
    assert not any(found() for found in report.values())  # The copy is clean before.
    if module == "<design>":  # A text of the map replaced: `old -> new`.
        old, new = code.split(" -> ")
        assert old in design.read_text()
        design.write_text(design.read_text().replace(old, new))
    elif module == "<audit>":  # A row added to the mechanism table.
        text = audit.read_text()
        table = text.index("| 1 | one builder")
        audit.write_text(text[:table] + code + "\n" + text[table:])
    else:
        path = copy / f"{module.replace('.', '/')}.py"
        if not path.exists():  # A folder's `__init__`.
            path = copy / module.replace(".", "/") / "__init__.py"
        path.write_text(path.read_text() + "\n\n" + code + "\n")
    assert report[check](), f"the checker missed: {planted}"


def mechanism_places(audit: Path = AUDIT) -> list[str]:
    """Each module (`_folder.module`, `_module`, or either followed by `.name`) that the
    mechanism table's "where" column names. Only the module is checked: a name inside it may move while the
    behaviour holds (the table says where; a review checks it)."""
    places: list[str] = []
    for line in section("Mechanisms", audit).splitlines():
        cells = line.split(" | ")
        if len(cells) >= 4 and cells[0].startswith("| ") and cells[0][2:].strip().isdigit():
            places += re.findall(r"`(_[\w.]+)`", cells[2])
    return places


def misplaced_mechanisms(package: Path = PACKAGE, audit: Path = AUDIT) -> list[str]:
    """The modules the mechanism table names that the package does not have."""
    found = modules(package)
    return [
        place
        for place in mechanism_places(audit)
        if place not in found and place.rpartition(".")[0] not in found
    ]


def test_every_mechanism_is_where_the_design_note_says() -> None:
    assert len(mechanism_places()) >= 26  # The table was read.
    missing = misplaced_mechanisms()
    assert not missing, f"the mechanism table names modules the package does not have: {missing}"


def test_no_module_is_over_600_lines() -> None:
    """A module holds one concept whole; past 600 lines it holds two (docs/design.md, Folders)."""
    sizes = {str(p): len(p.read_text().splitlines()) for p in sorted(PACKAGE.rglob("*.py"))}
    assert not {name: n for name, n in sizes.items() if n > 600}


def _top_level_names(tree: ast.Module | ast.If) -> set[str]:
    """The names a module binds at its top level: definitions, assignments, imports, in
    either branch of a top-level `if` (`if sys.version_info >= (3, 14):`)."""
    names: set[str] = set()
    for node in tree.body if isinstance(tree, ast.Module) else [*tree.body, *tree.orelse]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.If):
            names |= _top_level_names(node)
        else:
            names.update(target for target, _ in _bindings([node]))
    return names


def map_problems(package: Path = PACKAGE, design: Path = DESIGN) -> list[str]:
    """What the map (docs/design.md) names that the package does not have: an entry function
    of the folders table (`module.function`, in that folder) that its module does not define,
    a module of the features table that does not exist, or a public name there that none of its
    row's modules defines; and a map over 2,500 words."""
    found = modules(package)
    problems: list[str] = []
    words = len(design.read_text().split())
    if words > 2500:
        problems.append(f"the map has {words} words, over 2,500: move details to a folder's note")
    for line in section("Folders", design).splitlines():
        cells = line.split(" | ")
        if len(cells) != 3 or not re.fullmatch(r"\| `[\w.]+`", cells[0]):
            continue
        unit = cells[0][3:-1]
        entries = re.search(r"\(([^()]*)\)$", cells[1])
        for entry in re.findall(r"`([\w.]+)`", entries.group(1) if entries else ""):
            module, _, name = entry.rpartition(".")
            dotted = f"{unit}.{module}" if module else unit
            if dotted not in found or name not in _top_level_names(found[dotted]):
                problems.append(f"{unit}'s entry function {entry} is not in {dotted}")
    for line in section("Where each feature lives", design).splitlines():
        cells = line.split(" | ")
        if len(cells) != 3 or cells[0].startswith("| feature") or cells[0].startswith("| ---"):
            continue
        places = re.findall(r"`(_[\w.]+)`", cells[1])
        for place in places:
            if place not in found:
                problems.append(f"the features table names {place}, no module of the package")
        defined = set().union(*(_top_level_names(found[p]) for p in places if p in found))
        for name in re.findall(r"`([A-Za-z]\w*)`", cells[0]):
            if name not in defined:
                problems.append(f"{name} is not defined in {', '.join(places)}")
    return problems


def stale_references(package: Path = PACKAGE, notes: Path = DESIGN.parent) -> list[str]:
    """Each `_folder.module.name` (or `_module.name`) that docs/design.md or a note under
    docs/design/ cites and the package does not define: a module that does not exist, or a
    top-level name its module does not bind (a file name, `....py`, is not a reference)."""
    found = modules(package)
    stale: list[str] = []
    for page in [notes / "design.md", *sorted((notes / "design").glob("*.md"))]:
        cited = re.findall(r"`(_[a-z_]+(?:\.[A-Za-z_]\w*)+)`", page.read_text())
        for reference in sorted(set(cited)):
            parts = reference.split(".")
            if parts[-1] == "py":
                continue
            known = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in found), 0)
            module = ".".join(parts[:known])
            if not known or (
                known < len(parts) and parts[known] not in _top_level_names(found[module])
            ):
                stale.append(f"{page.name}: {reference}")
    return stale


def test_the_design_notes_cite_only_what_the_package_has() -> None:
    """A note that names a module or function names one that exists, as named: a rename or a
    removal that leaves the map or a note behind fails here."""
    assert not stale_references()


def test_the_stale_reference_check_finds_a_planted_one(tmp_path: Path) -> None:
    (tmp_path / "design").mkdir()
    (tmp_path / "design.md").write_text("The repr is `_core.printing.repr_sources`.")
    (tmp_path / "design" / "core.md").write_text("See `_core.nowhere` and `_core.printing`.")
    assert stale_references(notes=tmp_path) == [
        "design.md: _core.printing.repr_sources",
        "core.md: _core.nowhere",
    ]


def test_the_map_names_what_the_package_has() -> None:
    """docs/design.md is the page read first: at most 2,500 words, and its folders' entry
    functions and its features' modules are where it says."""
    problems = map_problems()
    assert not problems, "docs/design.md and the package disagree:\n" + "\n".join(problems)


_DECORATE_AND_TRACE = """
import sys
import jax
import jax_dataclasses as jdc

entered = set()

def profile(frame, event, arg):
    # The import hooks' `find_spec` runs for any import in the process (3.14 imports lazily
    # while a class is decorated): not the decoration's.
    if event == "call" and frame.f_code.co_name != "find_spec" and frame.f_globals.get(
        "__name__", ""
    ).startswith("jax_dataclasses."):
        entered.add(frame.f_globals["__name__"].split(".")[1])

sys.setprofile(profile)

@jdc.pytree_dataclass
class Block:
    w: jdc.Sharded[jax.Array, "embed", "mlp"]
    b: jdc.Frozen[jax.Array]
    n: jdc.Static[int] = 2
    __jdc_evolution__ = jdc.Evolution(renamed={"w": "kernel"})

@jdc.pytree_dataclass
class Later:
    x: "DefinedLater"
    y: jax.Array = None

class Adopted(Block):
    pass

sys.setprofile(None)
print(" ".join(sorted(entered)))
"""


@pytest.mark.subprocess
def test_decorating_a_class_enters_only_the_core_and_the_declarations() -> None:
    """What runs when classes are decorated (with every kind of declaration, a pending name,
    an adopted subclass): only the core's and the declarations' modules (issue 39)."""
    entered = run_python(["-c", _DECORATE_AND_TRACE]).split()
    assert entered == ["_core", "_field_declarations"]
