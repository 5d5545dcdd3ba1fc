"""Classes cloudpickled by value by each landed version load and behave as the same classes
defined now: the code they reference by name still exists, they print every field (a
subclass too, although cloudpickle left out the repr it shared with its base), and their
trees, paths, shardings, construction and frozenness are today's.

`pickles_landed.txt` holds, per landed commit, base64-encoded, a cloudpickle of four instances
(NumPy leaves, so any jax loads them) of classes defined in `__main__`, made by running this
module's `PICKLED` source there: dc492a8 (before issues 37 to 39) gave every class the same
`_printing.dataclass_repr`, 42fa477 compiled a `__repr__` per class that called
`_core.printing._generated_text`.
"""

from __future__ import annotations

import base64
import dataclasses
import sys
import types
from pathlib import Path

import cloudpickle
import jax
import numpy as np
import pytest

import jax_dataclasses as jdc

LOADABLE_HERE = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11) or int(np.__version__.split(".")[0]) < 2,
    reason="made on Python 3.11 with NumPy 2: cloudpickle copies code by value for one Python "
    "version only (other bytecode can crash the interpreter), and NumPy 1 lacks numpy._core",
)
LANDED = dict(
    line.split() for line in (Path(__file__).parent / "pickles_landed.txt").read_text().splitlines()
)

PICKLED = """
import dataclasses

import numpy as np

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Base:
    a: np.ndarray
    kernel: jdc.Sharded[np.ndarray, "embed"]
    width: jdc.Static[int] = 4


@jdc.pytree_dataclass
class Sub(Base):
    b: float = 2.0
    tags: jdc.Static[tuple[str, ...]] = ("x",)


class Adopted(Sub):
    pass


@jdc.pytree_dataclass
class Derived:
    x: np.ndarray
    history: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.history.append(1)


def objects():
    return (
        Base(np.arange(3.0), np.ones(2)),
        Sub(np.ones(2), np.zeros(1), 5, 3.0, ("y", "z")),
        Adopted(np.ones(1), np.ones(1)),
        Derived(np.arange(2.0)),
    )
"""
"""The classes and instances pickled (the script that made the file printed the commit and
`base64(cloudpickle.dumps(objects()))`, with each class's `__module__` set to `__main__`)."""


def made_now() -> tuple[object, ...]:
    """The same objects, from the same source run by today's package: the reference."""
    module = types.ModuleType("landed_reference")
    sys.modules[module.__name__] = module
    try:
        exec(compile(PICKLED, "<landed reference>", "exec"), module.__dict__)
        return module.objects()  # type: ignore[no-any-return]
    finally:
        del sys.modules[module.__name__]


def paths(tree: object) -> list[str]:
    return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


@LOADABLE_HERE
@pytest.mark.parametrize("commit", sorted(LANDED))
def test_a_class_pickled_by_value_by_a_landed_version_behaves_as_today(commit: str) -> None:
    loaded = cloudpickle.loads(base64.b64decode(LANDED[commit]))
    reference = made_now()
    for old, new in zip(loaded, reference, strict=True):
        assert repr(old) == repr(new)
        assert jdc.pformat([old, old], width=30) == jdc.pformat([new, new], width=30)
        assert str(jax.tree.structure(old)) == str(jax.tree.structure(new))
        assert paths(old) == paths(new)
        for a, b in zip(jax.tree.leaves(old), jax.tree.leaves(new), strict=True):
            np.testing.assert_array_equal(a, b)
        with pytest.raises(dataclasses.FrozenInstanceError, match=type(old).__qualname__):
            old.x = 1  # type: ignore[attr-defined]
    base, sub, adopted, derived = loaded
    rules = {"embed": "model"}
    assert repr(jdc.partition_specs(sub, rules)) == repr(jdc.partition_specs(reference[1], rules))
    assert repr(type(sub)(np.ones(1), np.ones(1))) == repr(
        type(reference[1])(np.ones(1), np.ones(1))
    )
    assert type(adopted)(np.ones(1), np.ones(1)).width == 4
    assert type(derived)(np.ones(1)).history == [1]  # `__post_init__` runs, with the factory.
    doubled = jax.jit(lambda tree: jax.tree.map(lambda x: 2 * x, tree))(sub)
    np.testing.assert_array_equal(doubled.b, 6.0)
    assert jdc.replace(base, width=8).width == 8
