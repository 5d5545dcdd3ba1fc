"""Array (and mesh) constructors shared by the typing cases (a helper module, not a case itself).

pyright in strict mode reports `jnp.zeros`, `jnp.ones`, `jnp.asarray`, ... as partially unknown,
because jaxlib ships no stub for its compiled `Device` type (a `device=` parameter). That is
jax's matter, not the subject of these cases, so the one suppression lives here.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec


def zeros(*shape: int) -> jax.Array:
    return jnp.zeros(shape)  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no Device stub


def ones(*shape: int) -> jax.Array:
    return jnp.ones(shape)  # pyright: ignore[reportUnknownMemberType]  # jaxlib: no Device stub


def replicated() -> PartitionSpec:
    return PartitionSpec()  # type: ignore[no-untyped-call]  # jax: no annotations on __init__


def one_device_mesh() -> Mesh:
    """One device as a 1 x 1 mesh of axes "data" and "model"."""
    # Declared types: jax 0.4.36 and NumPy 1.24 (the oldest corner) infer partly unknown ones.
    devices: np.ndarray[Any, Any] = np.array(jax.devices()[:1])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    mesh: Mesh = Mesh(devices.reshape(1, 1), ("data", "model"))  # pyright: ignore[reportUnknownVariableType]
    return mesh  # pyright: ignore[reportUnknownVariableType]
