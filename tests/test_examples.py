"""The tour runs and prints every step it promises (so the README's first command cannot rot)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tour_runs_every_step() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tour.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    steps = [line.split(".")[0] for line in result.stdout.splitlines() if line[:1].isdigit()]
    assert steps == ["1", "2", "3", "4", "5", "6", "7"], result.stdout
    assert "traced 1 time(s)" in result.stdout  # new weights, same statics: no recompilation
    assert "refused a bad edit" in result.stdout
