"""The package as users get it: wheel and sdist build, the wheel installs with only its
declared dependencies and imports with and without flax, and the sdist carries its tests."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

import jax_dataclasses as jdc

pytestmark = pytest.mark.subprocess  # Every test here starts a Python process.

ROOT = Path(__file__).resolve().parents[2]


def run(*command: str | Path, cwd: Path = ROOT, **env: str) -> str:
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=600,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheel and sdist, built without isolation (the test extra brings the build backend)."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT)
    return out


def test_version_has_one_source() -> None:
    assert jdc.__version__ == importlib.metadata.version("jax_dataclasses")


def test_wheel_metadata(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    assert wheel.name.startswith(f"jax_dataclasses-{jdc.__version__}-py3-none-any")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "jax_dataclasses/py.typed" in names
    assert any(name.endswith("licenses/LICENSE") for name in names)
    assert "License-Expression: MIT" in metadata
    assert "Author: The jax_dataclasses maintainers" in metadata
    for requirement in ("jax>=0.4.36", "jaxlib>=0.4.36", "numpy>=1.24.4"):
        assert f"Requires-Dist: {requirement}" in metadata
    assert 'Requires-Dist: flax>=0.10.2; extra == "flax"' in metadata


def test_sdist_carries_what_its_tests_need(dist: Path, tmp_path: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    (unpacked,) = tmp_path.iterdir()
    for needed in (
        "tests/transforms/_jit_future_annotations.py",
        "tests/helpers.py",
        "tests/typing/README.md",
        "examples/tour.py",
        "LICENSE",
        "CHANGELOG.md",
        "CONTRIBUTING.md",
        "mkdocs.yml",
        "docs/api.md",
        "docs/_build/offline_check.py",
        "constraints.txt",
        "constraints-oldest.txt",
        "dev.py",
        "tools/downstream.py",
        ".ci/run",
        ".github/workflows/ci.yml",
    ):
        assert (unpacked / needed).is_file(), needed
    collected = run(
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        cwd=unpacked,
    )
    assert "error" not in collected.lower().split("\n")[-2], collected[-2000:]


@pytest.mark.slow
def test_wheel_installs_with_its_declared_dependencies(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", "--progress-bar=off", wheel)
    without_flax = textwrap.dedent(
        """
        import sys
        import jax, jax.numpy as jnp
        import jax_dataclasses as jdc
        assert "flax" not in sys.modules and "orbax" not in sys.modules
        @jdc.pytree_dataclass
        class P:
            x: jax.Array
            n: jdc.Static[int] = 2
        print(jax.jit(lambda p: p.x * p.n)(P(jnp.ones(2))).tolist(), jdc.__file__)
        """
    )
    output = run(python, "-c", without_flax, cwd=tmp_path)
    assert output.startswith("[2.0, 2.0]") and str(environment) in output
    # With flax: the development environment's packages after the wheel's.
    with_flax = textwrap.dedent(
        """
        import jax, jax.numpy as jnp
        import jax_dataclasses as jdc
        from flax import serialization
        @jdc.pytree_dataclass
        class P:
            x: jax.Array
        print(serialization.to_state_dict(P(jnp.ones(1))))
        """
    )
    site = next(Path(p) for p in sys.path if p.endswith("site-packages"))
    output = run(python, "-c", with_flax, cwd=tmp_path, PYTHONPATH=str(site))
    assert "{'x': Array([1.], dtype=float32)}" in output
