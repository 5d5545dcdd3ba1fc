"""`python3 dev.py bench --check`: the short core benchmarks against the recorded figures.

Runs `bench_core.py --quick` and compares each ratio (ours / `register_dataclass`, in one
process) with `recorded.json`, taken on the same kind of machine. A ratio that grew by more
than max(the noise its control row shows, 10%) is a regression; the run is repeated once
before it counts, since one measurement on a shared machine can be disturbed. The targets are
printed, never gated on: a missed target has its measured reason in benchmarks/README.md.

`--record` writes `recorded.json` from a run instead: a regression made on purpose records
its new figure in the same commit, with the reason in the commit message.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded.json"
MIN_TOLERANCE = 0.10


def run_quick() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "ratios.json"
        command = [sys.executable, str(HERE / "bench_core.py"), "--quick", "--json", str(out)]
        subprocess.run(command, check=True)
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def regressions(recorded: dict[str, Any], measured: dict[str, Any]) -> list[str]:
    """One line per benchmark whose ratio grew by more than its tolerance."""
    found: list[str] = []
    for name, old in recorded["results"].items():
        new = measured["results"].get(name)
        if new is None:
            found.append(f"{name}: recorded, but not measured any more")
            continue
        noise = max(abs(old["control"] - 1), abs(new["control"] - 1))
        tolerance = max(noise, MIN_TOLERANCE)
        if new["ratio"] > old["ratio"] * (1 + tolerance):
            found.append(
                f"{name}: {new['ratio']:.2f}x, recorded {old['ratio']:.2f}x "
                f"(tolerance {tolerance:.0%})"
            )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--record", action="store_true", help="write recorded.json from a run")
    args = parser.parse_args()
    measured = run_quick()
    if args.record:
        RECORDED.write_text(json.dumps(measured, indent=1) + "\n")
        print(f"recorded {RECORDED.relative_to(HERE.parent)}")
        return 0
    recorded = json.loads(RECORDED.read_text())
    if (recorded["python"], recorded["jax"]) != (measured["python"], measured["jax"]):
        print(
            f"note: figures recorded with Python {recorded['python']}, jax {recorded['jax']}; "
            f"this is Python {measured['python']}, jax {measured['jax']}"
        )
    found = regressions(recorded, measured)
    if found:
        print("possible regressions, measuring again:\n  " + "\n  ".join(found))
        found = regressions(recorded, run_quick())
    if found:
        print("REGRESSIONS against benchmarks/recorded.json:\n  " + "\n  ".join(found))
        return 1
    print(f"no regression against {len(recorded['results'])} recorded ratios")
    return 0


if __name__ == "__main__":
    sys.exit(main())
