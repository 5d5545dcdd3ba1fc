"""The tooling behind `python3 dev.py` (dev.py and tools/): how its modules may import, and
what it reads from the machine.

dev.py runs before any virtual environment exists, so it and tools/ import the standard library
only; dev.py imports the tools, the tools import only `tools.venvs`, and `tools.venvs` none of
them, so nothing imports dev.py back (tools/__init__.py). These tests read the source as data.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from load_file import ROOT, load_file, load_tool

DEBIAN_ROOT = load_tool("debian_root")
SHARED = "tools.venvs"  # What both dev.py and the tools need.


def tooling_modules(root: Path = ROOT) -> dict[str, Path]:
    """dev.py and the modules of tools/, by the name they are imported under."""
    found = {"dev": root / "dev.py"}
    for path in sorted((root / "tools").glob("*.py")):
        found["tools" if path.stem == "__init__" else f"tools.{path.stem}"] = path
    return found


def imports(path: Path, package: str) -> set[str]:
    """The modules `path` imports, anywhere in it, as absolute names (`from tools import a`
    gives `tools.a`); `package`: the package a relative import starts from."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (package if node.level else "") + ("." if node.level and node.module else "")
            base += node.module or ""
            found.add(base)
            if base == "tools":
                found.update(f"tools.{alias.name}" for alias in node.names)
    return found


def import_problems(root: Path = ROOT) -> list[str]:
    """Each import against the rules of the module docstring above."""
    modules = tooling_modules(root)
    problems: list[str] = []
    for name, path in modules.items():
        for imported in sorted(imports(path, "tools")):
            top = imported.partition(".")[0]
            if top in sys.stdlib_module_names or imported in ("__future__", "tools"):
                continue
            if imported == "dev":
                problems.append(f"{name} imports dev.py back")
            elif top != "tools":
                problems.append(f"{name} imports {imported}, not in the standard library")
            elif imported not in modules:
                problems.append(f"{name} imports {imported}, which tools/ does not hold")
            elif name != "dev" and (name == SHARED or imported != SHARED):
                problems.append(f"{name} imports {imported}: the tools import only {SHARED}")
    return problems


def test_the_tooling_imports_the_standard_library_and_no_circle() -> None:
    assert set(tooling_modules()) >= {"dev", SHARED, "tools.debian_root", "tools.screenshots"}
    assert import_problems() == []


@pytest.mark.parametrize(
    ("module", "planted", "problem"),
    [
        ("screenshots", "import dev", "tools.screenshots imports dev.py back"),
        ("downstream", "from dev import log", "tools.downstream imports dev.py back"),
        ("debian_root", "from tools import screenshots", "tools.debian_root imports tools.scr"),
        ("venvs", "from .downstream import main", "tools.venvs imports tools.downstream"),
        ("venvs", "import numpy", "tools.venvs imports numpy, not in the standard library"),
    ],
)
def test_the_import_check_finds_a_planted_violation(
    module: str, planted: str, problem: str, tmp_path: Path
) -> None:
    shutil.copy(ROOT / "dev.py", tmp_path / "dev.py")
    shutil.copytree(ROOT / "tools", tmp_path / "tools", ignore=shutil.ignore_patterns("__py*"))
    path = tmp_path / "tools" / f"{module}.py"
    path.write_text(path.read_text() + f"\n\ndef _planted() -> None:\n    {planted}\n")
    (found,) = import_problems(tmp_path)
    assert found.startswith(problem)


def test_the_debian_root_comes_from_the_machines_own_mirror(tmp_path: Path) -> None:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    assert DEBIAN_ROOT.mirror(apt) == "http://deb.debian.org/debian"  # no sources: Debian's
    (apt / "sources.list").write_text(
        "# deb http://commented.example/debian sid main\n"
        "deb http://security.debian.org/debian-security bookworm-security main\n"
    )
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
    )
    (apt / "sources.list.d" / "debian.sources.bak").write_text("deb http://old.example/debian x")
    assert DEBIAN_ROOT.mirror(apt) == "http://mirror.example/debian"


def test_the_debian_root_is_made_again_only_when_its_command_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(DEBIAN_ROOT, "run", lambda command: ran.append(command) or 1)
    monkeypatch.setattr(DEBIAN_ROOT.os, "geteuid", lambda: 0)  # as root, with debootstrap
    monkeypatch.setattr(DEBIAN_ROOT.shutil, "which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setenv("JDC_ROOT", str(tmp_path / "root"))
    root = DEBIAN_ROOT.root_path("3.14")
    root.mkdir()
    (root / ".jdc-stamp").write_text(" ".join(DEBIAN_ROOT.debootstrap_command("3.14")) + "\n")
    assert DEBIAN_ROOT.ensure("3.14") == root
    assert ran == []  # stamped with the same command: reused
    with pytest.raises(SystemExit, match="debootstrap failed"):
        DEBIAN_ROOT.ensure("3.15")
    (command,) = ran
    assert command[:-1] == [*DEBIAN_ROOT.debootstrap_command("3.15"), f"{root}.partial"]
    assert "python3.15-venv" in command[2]
    assert (root / ".jdc-stamp").exists()  # the old root stays until a new one is made


@pytest.mark.parametrize("given", [["--python"], ["--python", "3.11t"], ["--python", "3.10"]])
def test_test_python_takes_a_supported_version_only(given: list[str]) -> None:
    dev = load_file(ROOT / "dev.py")
    with pytest.raises(SystemExit, match=r"--python takes one of 3\.11, .*3\.14, 3\.14t"):
        dev.test_corner(given)
    assert dev.test_corner(["--python", "3.14t", "-k", "x"])[2] == ["-k", "x"]


@pytest.mark.subprocess
def test_a_deprecation_fails_the_suite_only_where_the_package_meets_it(tmp_path: Path) -> None:
    """pyproject.toml's warning filter: a deprecated API that the package calls fails a test
    (the newest JAX removes what it warns of); one that a third party (orbax, flax) calls
    inside its own code is reported, not failed, since we cannot change it."""
    (tmp_path / "test_planted.py").write_text(
        "import warnings\n\n"
        "def warn_from(module):\n"
        "    code = 'import warnings\\nwarnings.warn(\"old\", DeprecationWarning)'\n"
        "    exec(code, {'__name__': module})\n\n"
        "def test_ours():\n"
        "    warn_from('jax_dataclasses._planted')\n\n"
        "def test_theirs():\n"
        "    warn_from('orbax.checkpoint._planted')\n"
    )
    command = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
    command += ["--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-q", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert "DeprecationWarning: old" in result.stdout, result.stdout
    assert "test_planted.py::test_ours" in result.stdout.split("short test summary")[-1]
    assert "1 failed, 1 passed" in result.stdout, result.stdout
