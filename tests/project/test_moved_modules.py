"""The modules' paths before issue 39 moved them into folders still import, as the same modules,
and pickles made before the move still load. house_rewrite: skip (the old paths, on purpose).

`pickles_before_issue_39.txt` holds, base64-encoded, what the code before the move (commit
f636782) pickled: an `Evolution`, a `Declaration`, a `StaticFieldWarning`, and an instance of a
class defined in `__main__`, so cloudpickled by value, with a `Static` and a `Sharded` field
(it calls `jax_dataclasses._builder.reload` and holds objects of `_forms`, `_frozen`,
`_construct`, ...). Made with:

    @jdc.pytree_dataclass
    class Layer:
        kernel: jdc.Sharded[jnp.ndarray, "embed", "mlp"]
        width: jdc.Static[int] = 4
    Layer.__module__ = "__main__"
    cloudpickle.dumps(Layer(kernel=jnp.arange(6.0).reshape(2, 3)))
    pickle.dumps(jdc.Evolution(added=["scale"], renamed={"kernel": "w"}))
    pickle.dumps(Declaration(name="width", owner="Layer", legacy_static=True))
    pickle.dumps(jdc.StaticFieldWarning("a warning"))
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import pickle
import sys
from pathlib import Path

import cloudpickle
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_python
from jax.sharding import PartitionSpec

import jax_dataclasses as jdc

NEW_ENOUGH = pytest.mark.skipif(
    tuple(int(part) for part in jax.__version__.split(".")[:2]) < (0, 5)
    or sys.version_info[:2] != (3, 11),
    reason="made on Python 3.11 holding a jax 0.10.2 array: jaxlib 0.4.36 cannot load the "
    "array, and cloudpickle copies code by value for one Python version only (other bytecode "
    "can crash the interpreter)",
)
PICKLES = {
    name: base64.b64decode(data)
    for name, data in (
        line.split() for line in (Path(__file__).parent / "pickles_before_issue_39.txt").open()
    )
}

# Written out here, not read from the package: each path before the move and after it.
OLD_TO_NEW = {
    "_builder": "_core.builder",
    "_codegen": "_core.codegen",
    "_construct": "_core.construct",
    "_record": "_core.record",
    "_frozen": "_core.frozen",
    "_defaults": "_core.defaults",
    "_static_values": "_core.static_values",
    "_printing": "_core.printing",
    "_forms": "_field_declarations.forms",
    "_declarations": "_field_declarations.reader",
    "_scope": "_field_declarations.scope",
    "_serialization": "_checkpoints.serialization",
    "_evolution": "_checkpoints.evolution",
    "_export": "_checkpoints.export",
    "_sharding": "_sharding_layouts.vocabulary",
    "_sharding_rules": "_sharding_layouts.rules",
    "_sharded_trees": "_sharding_layouts.trees",
    "_sharding_checks": "_sharding_layouts.checks",
    "_explain": "_diagnostics.explain",
    "_recompiles": "_diagnostics.recompiles",
    "_enforced_annotations": "_compat.enforced_annotations",
}


@pytest.mark.parametrize("old", OLD_TO_NEW)
def test_an_old_path_imports_the_module_at_its_new_path(old: str) -> None:
    module = importlib.import_module(f"jax_dataclasses.{old}")
    new = importlib.import_module(f"jax_dataclasses.{OLD_TO_NEW[old]}")
    assert module is new
    assert module.__name__ == module.__spec__.name == f"jax_dataclasses.{OLD_TO_NEW[old]}"
    assert getattr(jdc, old) is new  # As an import binds a submodule on its package.


def test_objects_named_by_old_paths_are_the_same_objects() -> None:
    import jax_dataclasses._core.builder
    import jax_dataclasses._core.frozen
    import jax_dataclasses._core.record
    import jax_dataclasses._field_declarations.forms
    import jax_dataclasses._field_declarations.reader
    from jax_dataclasses._builder import reload
    from jax_dataclasses._declarations import Declaration
    from jax_dataclasses._forms import Axes
    from jax_dataclasses._frozen import frozen_setattr
    from jax_dataclasses._record import Layout
    from jax_dataclasses._static_values import StaticFieldWarning

    assert reload is jax_dataclasses._core.builder.reload
    assert Declaration is jax_dataclasses._field_declarations.reader.Declaration
    assert Axes is jax_dataclasses._field_declarations.forms.Axes
    assert frozen_setattr is jax_dataclasses._core.frozen.frozen_setattr
    assert Layout is jax_dataclasses._core.record.Layout
    assert StaticFieldWarning is jdc.StaticFieldWarning


def test_patching_an_old_path_patches_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    import jax_dataclasses._core.printing

    monkeypatch.setattr("jax_dataclasses._printing.pformat", "patched")
    assert jax_dataclasses._core.printing.pformat == "patched"


def test_a_path_that_never_existed_still_fails() -> None:
    with pytest.raises(ModuleNotFoundError, match=r"jax_dataclasses\._no_such_module"):
        importlib.import_module("jax_dataclasses._no_such_module")


def test_values_pickled_before_the_move_load() -> None:
    from jax_dataclasses._field_declarations.reader import Declaration

    assert pickle.loads(PICKLES["evolution"]) == jdc.Evolution(
        added=["scale"], renamed={"kernel": "w"}
    )
    assert pickle.loads(PICKLES["declaration"]) == Declaration(
        name="width", owner="Layer", legacy_static=True
    )
    warning = pickle.loads(PICKLES["warning"])
    assert type(warning) is jdc.StaticFieldWarning and warning.args == ("a warning",)


def check_layer(layer: object) -> None:
    """The cloudpickled instance works: its leaves, its static field, its sharding, jit, copy."""
    leaves, treedef = jax.tree.flatten(layer)
    np.testing.assert_array_equal(leaves[0], np.arange(6.0).reshape(2, 3))
    assert len(leaves) == 1 and layer.width == 4
    assert treedef == jax.tree.structure(jax.tree.unflatten(treedef, leaves))
    specs = jdc.partition_specs(layer, {"embed": None, "mlp": "model"})
    assert specs.kernel == PartitionSpec(None, "model")
    doubled = jax.jit(lambda x: jax.tree.map(lambda a: 2 * a, x))(layer)
    np.testing.assert_array_equal(doubled.kernel, 2 * np.arange(6.0).reshape(2, 3))
    with jdc.copy_and_mutate(layer) as copy:
        copy.kernel = jnp.zeros((2, 3))  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        layer.kernel = jnp.zeros((2, 3))  # type: ignore[attr-defined]
    assert type(layer).__name__ in jdc.pformat(layer)


@NEW_ENOUGH
def test_a_class_cloudpickled_by_value_before_the_move_loads() -> None:
    check_layer(cloudpickle.loads(PICKLES["class_by_value"]))


@NEW_ENOUGH
@pytest.mark.subprocess
def test_a_fresh_process_loads_the_old_pickles_before_importing_the_package() -> None:
    """Unpickling is the first import of the package (as in a worker process)."""
    code = f"""
import pickle, sys
data = {PICKLES["class_by_value"]!r}
assert "jax_dataclasses" not in sys.modules
layer = pickle.loads(data)
print(type(layer).__name__, layer.width, sys.modules["jax_dataclasses._builder"].__name__)
"""
    output = run_python(["-c", code])
    assert output.split() == ["Layer", "4", "jax_dataclasses._core.builder"]


@NEW_ENOUGH
@pytest.mark.subprocess
def test_static_still_declares_static_after_an_old_pickle_loads() -> None:
    """Pickles made before the marker pickled by name hold a copy of it: loaded first in a
    process, that copy took the place of ours in `typing`'s cache, and from then on
    `Static[int]` carried it, and the spelling that takes its metadata made a child (a traced
    `Static` parameter of `jdc.jit`; a field silently dynamic)."""
    code = f"""
import pickle, typing
import jax
import jax.numpy as jnp
import jax_dataclasses as jdc
pickle.loads({PICKLES["class_by_value"]!r})
mark = jdc.Static[int].__metadata__[0]

@jdc.pytree_dataclass
class Config:
    n: typing.Annotated[int, mark]
    m: jdc.Static[int] = 2

@jdc.jit
def tile(x: jax.Array, n: typing.Annotated[int, mark]) -> jax.Array:
    return jnp.tile(x, n)

print(jax.tree.leaves(Config(3)), tile(jnp.ones(1), 3).shape)
"""
    assert run_python(["-c", code]).split("\n")[0] == "[] (3,)"


def test_the_finder_is_installed_once() -> None:
    from jax_dataclasses._compat.moved import install

    install()  # Again, as a second import of the package would.
    assert len([f for f in sys.meta_path if type(f).__name__ == "MovedModules"]) == 1
