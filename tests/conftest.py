"""Fixtures shared by test modules."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built as `python3 dev.py docs` builds it (strict), once."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("needs the docs extra")
    site = tmp_path_factory.mktemp("docs") / "site"
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)]
    subprocess.run(build, cwd=ROOT, check=True, capture_output=True)
    return site
