"""Pytree dataclasses on a mesh of 8 devices (the checks are in `tests/_sharding_child.py`).

The device count is fixed when JAX starts, and the rest of the suite must keep its normal one,
so the checks run with pytest in a child process started with
`XLA_FLAGS=--xla_force_host_platform_device_count=8`. A failure shows the child's report.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "_sharding_child.py"
TIMEOUT_SECONDS = 600


def child_environment(device_count: int) -> dict[str, str]:
    """This environment, on `device_count` CPU devices, without pytest options meant for us."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    flag = f"--xla_force_host_platform_device_count={device_count}"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    return env


def as_text(output: str | bytes | None) -> str:
    """Output captured before a timeout: bytes, text or nothing, depending on the platform."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def test_pytree_dataclasses_on_a_mesh_of_8_devices() -> None:
    command = [sys.executable, "-m", "pytest", str(CHILD), "-q", "-p", "no:cacheprovider"]
    command += ["-rfE", "--tb=short", "--no-header"]
    try:
        result = subprocess.run(
            command,
            cwd=ROOT,
            env=child_environment(8),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(
            f"{CHILD.name} did not finish within {TIMEOUT_SECONDS} s and was killed.\n"
            f"--- output so far ---\n{as_text(timeout.stdout)}\n{as_text(timeout.stderr)}"
        )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command)}\nexited with {result.returncode}; its report:\n"
            f"{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
