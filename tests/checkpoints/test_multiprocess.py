"""Two processes on 127.0.0.1, 2 CPU devices each, one global mesh of 4 (`jax.distributed`).

The test owns the data and the reference result (NumPy); each process runs
`tests/checkpoints/_multiprocess_worker.py`: a jitted, donated SGD step on a replicated pytree dataclass
and a row-sharded one. Both processes must report the same numbers, equal to the reference,
and print both (arrays spanning processes print as summaries, never fetched).
Processes are always waited for with a deadline and killed on the way out.
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.subprocess  # Every test here starts a Python process.

WORKER = Path(__file__).resolve().parent / "_multiprocess_worker.py"
ROOT = WORKER.parents[2]
GLOO_UNAVAILABLE = 77  # The worker's exit code when this jaxlib has no gloo collectives.
NUM_PROCESSES = 2
DEADLINE_SECONDS = 300
STEPS, LEARNING_RATE = 3, 0.1  # As in the worker.


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def worker_environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    flag = "--xla_force_host_platform_device_count=2"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_NUM_CPU_DEVICES"] = "2"  # It would override XLA_FLAGS if inherited.
    return env


def reference(
    data: dict[str, np.ndarray], steps: int
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """SGD on the mean squared error of `x @ w + b`, in float64, with the gradient by hand."""
    x, y = data["x"].astype(np.float64), data["y"].astype(np.float64)
    w, b = data["w"].astype(np.float64), data["b"].astype(np.float64)
    losses = []
    for _ in range(steps):
        residual = x @ w + b - y
        losses.append(float(np.mean(residual**2)))
        scale = 2.0 / residual.size
        w, b = (
            w - LEARNING_RATE * scale * x.T @ residual,
            b - LEARNING_RATE * scale * residual.sum(0),
        )
    return w, b, losses


def run_workers(tmp_path: Path, data_path: Path, worker: Path = WORKER) -> list[tuple[int, str]]:
    """Start the processes (`worker PORT PROCESS_ID DATA_NPZ RESULT_NPZ`, each with its own
    tmp_path/result{i}.npz) and return (exit code, output) of each, once every one exited 0:
    the test is skipped where this jaxlib has no gloo collectives, and fails, showing every
    process's output, where one failed or timed out.

    Waits until all have exited, one has failed (the others could only wait for it), or the
    deadline has passed; whatever still runs then is killed.
    """
    port = free_loopback_port()
    processes: list[subprocess.Popen[bytes]] = []
    logs = [tmp_path / f"worker{i}.log" for i in range(NUM_PROCESSES)]
    killed: set[int] = set()
    try:
        for i, log in enumerate(logs):
            with log.open("wb") as out:
                command = [sys.executable, str(worker), str(port), str(i), str(data_path)]
                command.append(str(tmp_path / f"result{i}.npz"))
                processes.append(
                    subprocess.Popen(
                        command, cwd=ROOT, env=worker_environment(), stdout=out, stderr=out
                    )
                )
        deadline = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < deadline:
            codes = [process.poll() for process in processes]
            if None not in codes or any(code not in (None, 0) for code in codes):
                break
            time.sleep(0.1)
    finally:
        for i, process in enumerate(processes):
            if process.poll() is None:
                process.kill()
                killed.add(i)
            process.wait()
    outcomes = [
        (
            process.returncode,
            ("[killed by the test]\n" if i in killed else "") + log.read_text(errors="replace"),
        )
        for i, (process, log) in enumerate(zip(processes, logs, strict=True))
    ]
    report = "\n".join(
        f"--- process {i}: exit code {code} ---\n{output}"
        for i, (code, output) in enumerate(outcomes)
    )
    if any(code == GLOO_UNAVAILABLE for code, _ in outcomes):
        pytest.skip(f"gloo CPU collectives are unavailable in this jaxlib:\n{report}")
    if any(code != 0 for code, _ in outcomes):
        pytest.fail(
            f"a worker failed or timed out ({DEADLINE_SECONDS} s):\n{report}", pytrace=False
        )
    return outcomes


def test_jitted_step_on_a_mesh_spanning_two_processes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    data = {
        "x": rng.normal(size=(8, 3)).astype(np.float32),
        "y": rng.normal(size=(8, 2)).astype(np.float32),
        "w": rng.normal(size=(3, 2)).astype(np.float32),
        "b": np.zeros(2, np.float32),
    }
    data_path = tmp_path / "data.npz"
    np.savez(data_path, **data)

    outcomes = run_workers(tmp_path, data_path)

    for _, output in outcomes:  # Printing never fetches an array that spans processes.
        printed = next(line for line in output.splitlines() if line.startswith("printed: "))
        assert "Linear(w=f32[3,2], b=f32[2]" in printed, printed
        assert "Batch(x=f32[8@data,3], y=f32[8@data,2])" in printed, printed  # sharded rows

    results = [np.load(tmp_path / f"result{i}.npz") for i in range(NUM_PROCESSES)]
    for name in ("w", "b", "loss"):
        np.testing.assert_array_equal(results[0][name], results[1][name], err_msg=name)
    w, b, losses = reference(data, STEPS)
    np.testing.assert_allclose(results[0]["w"], w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[0]["b"], b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[0]["loss"], losses, rtol=1e-5)
