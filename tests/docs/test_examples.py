"""The examples run as documented (so the README's commands cannot rot)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # Every test here starts a Python process.

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tour_runs_every_step() -> None:
    stdout = run_example("tour.py")
    steps = [line.split(".")[0] for line in stdout.splitlines() if line[:1].isdigit()]
    assert steps == ["1", "2", "3", "4", "5", "6", "7"], stdout
    assert "traced 1 time(s)" in stdout  # new weights, same statics: no recompilation
    assert "refused a bad edit" in stdout


def test_data_parallel_example_learns_on_one_device() -> None:
    stdout = run_example("data_parallel.py")  # The 8-device run is in test_sharding.py.
    assert "1 device(s)" in stdout and "each device saw 32 of the 32 rows" in stdout, stdout
    losses = [float(loss) for loss in re.findall(r"mean loss ([0-9.]+)", stdout)]
    assert len(losses) >= 2 and losses[-1] < losses[0] / 4, stdout
