"""`load_file`: import a Python file that is not on the path (dev.py, dev_downstream.py,
benchmarks/check.py, the mkdocs hooks), for the tests that check them, with its folder on the
path while it loads (dev_downstream.py imports dev.py beside it). Imports nothing else, so
tests that read files as data stay free of jax and jax_dataclasses."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


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
