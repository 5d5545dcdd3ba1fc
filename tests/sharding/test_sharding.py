"""Pytree dataclasses on a mesh of 8 devices (the checks are in `tests/sharding/_sharding_child.py`,
those of `jdc.Sharded` declarations in `tests/sharding/_sharding_decl_child.py`, and those of stacked
layers, constraints, the rules context and flax's own run of its guide's model in
`tests/sharding/_sharding_scale_child.py`).

The device count is fixed when JAX starts, and the rest of the suite must keep its normal one,
so the checks run with pytest in a child process started with
`XLA_FLAGS=--xla_force_host_platform_device_count=8`. A failure shows the child's report.
"""

import re
from pathlib import Path

import pytest
from helpers import run_python

pytestmark = pytest.mark.subprocess  # Every test here starts a Python process.

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "_sharding_child.py"
DECLARATIONS_CHILD = Path(__file__).resolve().parent / "_sharding_decl_child.py"
SCALE_CHILD = Path(__file__).resolve().parent / "_sharding_scale_child.py"
EXAMPLE = ROOT / "examples" / "data_parallel.py"
DEVICE_COUNT = 8


def run_on_devices(arguments: list[str]) -> str:
    return run_python(arguments, DEVICE_COUNT, cwd=ROOT)


@pytest.mark.parametrize("child", [CHILD, DECLARATIONS_CHILD, SCALE_CHILD], ids=lambda p: p.stem)
def test_children_on_a_mesh_of_8_devices(child: Path) -> None:
    run_on_devices(
        ["-m", "pytest", str(child), "-q", "-p", "no:cacheprovider", "-rfE", "--tb=short"]
    )


def test_data_parallel_example_learns_on_8_devices() -> None:
    output = run_on_devices([str(EXAMPLE)])
    assert f"{DEVICE_COUNT} device(s)" in output, output
    assert f"each device saw 32 of the {32 * DEVICE_COUNT} rows" in output, output
    losses = [float(loss) for loss in re.findall(r"mean loss ([0-9.]+)", output)]
    assert len(losses) >= 2 and losses[-1] < losses[0] / 4, output
