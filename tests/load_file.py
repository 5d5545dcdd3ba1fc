"""`load_file`: import a Python file that is not on the path (dev.py, benchmarks/check.py, the
mkdocs hooks), for the tests that check them, with its folder on the path while it loads;
`load_tool`: a module of tools/ (the tooling behind dev.py), imported with the checkout on
the path while it loads. Imports nothing else, so tests that read files as data stay free of
jax and jax_dataclasses."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_file(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None  # A test helper: a file we ship.
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def load_tool(name: str) -> types.ModuleType:
    """tools/<name>.py, as `tools.<name>`: its imports of `tools.venvs` resolve in the checkout."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(f"tools.{name}")
    finally:
        sys.path.remove(str(ROOT))
