"""`python3 dev.py bench --check`'s rule (benchmarks/check.py), on made-up figures: a ratio
fails when it grew by more than max(its control's noise, 10%). No timing is measured here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import run_python
from load_file import load_file

ROOT = Path(__file__).resolve().parents[2]


def load_check() -> Any:
    return load_file(ROOT / "benchmarks" / "check.py")


def figures(ratio: float, control: float = 1.0) -> dict[str, Any]:
    return {"results": {"flatten, N=100": {"ratio": ratio, "control": control}}}


def test_growth_beyond_ten_percent_is_a_regression() -> None:
    check = load_check()
    assert check.regressions(figures(1.5), figures(1.64)) == []
    (found,) = check.regressions(figures(1.5), figures(1.66))
    assert found.startswith("flatten, N=100: 1.66x, recorded 1.50x")


def test_a_noisy_control_widens_the_tolerance() -> None:
    check = load_check()
    assert check.regressions(figures(1.5), figures(1.7, control=1.15)) == []
    assert check.regressions(figures(1.5), figures(1.75, control=1.15))


def test_a_ratio_no_longer_measured_is_reported() -> None:
    check = load_check()
    assert check.regressions(figures(1.5), {"results": {}}) == [
        "flatten, N=100: recorded, but not measured any more"
    ]


def test_the_recorded_figures_cover_the_core_operations() -> None:
    recorded = load_check().RECORDED.read_text()
    for name in ("flatten", "unflatten", "keyed flatten", "jit, model in", "decoration"):
        assert f'"{name}' in recorded


BENCHMARK_RUNS = {
    "bench_core.py": ["--rounds", "1", "--sizes", "10", "--classes", "20"],
    "bench_copy_and_mutate.py": ["--rounds", "1", "--sizes", "10"],
    "bench_jit.py": ["--rounds", "1", "--number", "1", "--nodes", "10"],
    "bench_printing.py": ["--layers", "10", "--rounds", "1"],
    "bench_recompiles.py": ["--leaves", "100", "--rounds", "1"],
    "bench_sharding.py": ["--rounds", "1", "--sizes", "10"],
    "bench_structure.py": [],
}


def test_every_benchmark_script_has_a_short_run() -> None:
    scripts = {path.name for path in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts == BENCHMARK_RUNS.keys()


@pytest.mark.subprocess
@pytest.mark.parametrize("script", BENCHMARK_RUNS)
def test_each_benchmark_runs(script: str) -> None:
    """Nothing imports the benchmarks: a renamed function they time breaks only them. They
    run where `python3 dev.py bench` runs them, with the dev extra (equinox, for printing)."""
    pytest.importorskip("equinox", reason="the benchmarks need the dev extra")
    run_python([str(ROOT / "benchmarks" / script), *BENCHMARK_RUNS[script]])
