"""Sharded checkpoints across two processes (`jax.distributed`, 2 CPU devices each, a global
mesh of 4): a model whose fields declare `jdc.Sharded` axes and its adam state, saved with
orbax by both processes and restored by both into targets made from the declarations, on
the mesh it was saved from (4 x 1) and on another (2 x 2).

The test owns the data and the reference (adam in NumPy); each process runs
`tests/checkpoints/_checkpoint_worker.py`. Both must report the reference values, and every restored
array must carry the spec its declaration gives on that mesh. Processes are started, waited
for with a deadline and killed on the way out by `tests/checkpoints/test_multiprocess.py`'s `run_workers`.
"""

from pathlib import Path

import numpy as np
import pytest
from test_multiprocess import NUM_PROCESSES, run_workers

pytestmark = pytest.mark.subprocess  # Every test here starts Python processes.

WORKER = Path(__file__).resolve().parent / "_checkpoint_worker.py"
SHAPES = {  # As the worker's Model: Dense(w, b, scale) twice.
    "hidden.w": (8, 16),
    "hidden.b": (16,),
    "hidden.scale": (),
    "head.w": (16, 4),
    "head.b": (4,),
    "head.scale": (),
}
LEARNING_RATE, B1, B2, EPS = 0.1, 0.9, 0.999, 1e-8  # optax.adam(0.1)'s defaults.
# What each field's declaration gives with rules {"embed": "data", "mlp": "model"}, written
# out by hand: w is Sharded["embed", "mlp"], b Sharded["mlp"], scale undeclared.
SPECS = {"w": ("data", "model"), "b": ("model",), "scale": ()}


def adam_reference(data: dict[str, np.ndarray], steps: int) -> dict[str, np.ndarray]:
    """The train state's leaves after `steps` adam steps with the data's gradients, in
    float64, named as the worker names them."""
    state: dict[str, np.ndarray] = {}
    for name in SHAPES:
        p = data[name].astype(np.float64)
        mu, nu = np.zeros_like(p), np.zeros_like(p)
        for t in range(1, steps + 1):
            g = data[f"grad{t - 1}.{name}"].astype(np.float64)
            mu, nu = B1 * mu + (1 - B1) * g, B2 * nu + (1 - B2) * g**2
            mu_hat, nu_hat = mu / (1 - B1**t), nu / (1 - B2**t)
            p = p - LEARNING_RATE * mu_hat / (np.sqrt(nu_hat) + EPS)
        state[f"params.{name}"] = p
        state[f"opt_state.0.mu.{name}"] = mu
        state[f"opt_state.0.nu.{name}"] = nu
    state["opt_state.0.count"] = np.array(steps)
    return state


def test_sharded_train_state_saved_by_two_processes_restores_onto_two_meshes(
    tmp_path: Path,
) -> None:
    pytest.importorskip("optax")
    pytest.importorskip("orbax.checkpoint")
    rng = np.random.default_rng(0)
    data = {
        f"{prefix}{name}": rng.normal(size=shape).astype(np.float32)
        for prefix in ("", "grad0.", "grad1.")
        for name, shape in SHAPES.items()
    }
    data_path = tmp_path / "data.npz"
    np.savez(data_path, **data)

    outcomes = run_workers(tmp_path, data_path, WORKER)

    reference = adam_reference(data, steps=2)
    meshes = {"4x1": {"data": 4, "model": 1}, "2x2": {"data": 2, "model": 2}}
    for i in range(NUM_PROCESSES):
        results = np.load(tmp_path / f"result{i}.npz")
        for mesh in meshes:
            names = {key.removeprefix(f"{mesh}/") for key in results if key.startswith(mesh)}
            values = {name for name in names if not name.endswith("/spec")}
            assert values == set(reference), sorted(values ^ set(reference))
            for name, want in reference.items():
                got = results[f"{mesh}/{name}"]
                assert got.shape == want.shape, (mesh, name)
                np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=name)
                field = name.rsplit(".", 1)[-1]
                declared = () if name == "opt_state.0.count" else SPECS[field]
                assert str(results[f"{mesh}/{name}/spec"]) == repr(declared), (mesh, name)
        # Printing names each dimension's mesh axes (on 4 x 1 too, where "model" has size 1).
        output = outcomes[i][1]
        assert "restored on 4x1: Model(hidden=Dense(w=f32[8@data,16@model]" in output, output
        assert "restored on 2x2: Model(hidden=Dense(w=f32[8@data,16@model]" in output, output
