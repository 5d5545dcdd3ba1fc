"""The checkpoints oracle: hypothesis generates a class change (fields kept, renamed, removed,
added, reordered, a child that became static, a static field that became a child; declared or
not), a model around the class (alone, nested, a list of it, stacked), an optimizer state
around the model (adam, `MultiSteps`), a target (holding values, or abstract) and a format
(flax bytes, orbax through `saved_layout`, 1.6's positional layout). A checkpoint written
with the class as it was is restored into the class as it is, and every leaf must equal an
independent reference, built from the generated change alone (which old field each new one
is, what the target holds), or the restore must be refused naming every difference.

A declared change declares the order 1.6 saved the fields in (`v1_6_order`); in 1.6's layout
a class that declares nothing loads by place, as 1.6 did (documented), and the reference
follows places there.

Orbax is represented by its metadata (each saved array's shape and dtype) and by what it
restores into `saved_layout`'s tree (the saved arrays, keyed as saved), and all three formats
are written and read in this process: `test_checkpoint_oracle_written.py` writes a batch of
these cases in a fresh process with the real libraries and reads them back through them.

`JDC_CHECKPOINT_EXAMPLES=500` runs a longer random search.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import zlib
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

import jax_dataclasses as jdc

serialization = pytest.importorskip("flax.serialization")
optax = pytest.importorskip("optax")

_EXAMPLES = int(os.environ.get("JDC_CHECKPOINT_EXAMPLES", "0"))
ORACLE = settings(
    max_examples=_EXAMPLES or 40,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
SEED = zlib.crc32(f"{sys.version} checkpoints".encode())
"""The normal suite's fixed seed (other cases on each Python); a longer search is random."""


def fixed(test: Any) -> Any:
    return test if _EXAMPLES else seed(SEED)(test)


# -- a generated change -------------------------------------------------------------------------

FATES = ("kept", "renamed", "removed", "static")


class Change(NamedTuple):
    fates: tuple[str, ...]
    """Of each old field `f0, f1, ...`: kept, renamed (now `r<i>`), removed, or static now."""
    added: int
    """Fields `a0, a1, ...` added, with defaults."""
    static_to_child: bool
    """The old class's static `cfg` is now a child (declared added)."""
    order: tuple[int, ...]
    """The new class's fields, in this order of `new_fields`."""
    declared: bool
    model: str
    optimizer: str
    """Around the model: none, (params, adam's state), `MultiSteps`'s, a `TrainState`."""
    abstract: bool
    format: str

    def new_fields(self) -> list[tuple[str, str | None]]:
        """(new name, the old field it is, or None for added), in the new class's order."""
        fields: list[tuple[str, str | None]] = []
        for i, fate in enumerate(self.fates):
            if fate in ("kept", "renamed"):
                fields.append((f"r{i}" if fate == "renamed" else f"f{i}", f"f{i}"))
        fields += [(f"a{j}", None) for j in range(self.added)]
        if self.static_to_child:
            fields.append(("cfg", None))
        return [fields[i] for i in self.order]

    def sources(self) -> dict[str, str | None]:
        """Which old field each new child holds: by name (`new_fields`); in 1.6's layout of a
        class that declares nothing, by place (as 1.6 did), where the counts agree."""
        fields = self.new_fields()
        olds = [f"f{i}" for i in range(len(self.fates))]
        if self.format == "1.6" and not self.declared and len(olds) == len(fields):
            return {name: old for (name, _), old in zip(fields, olds, strict=True)}
        return dict(fields)

    def changes_nothing_keyed(self) -> bool:
        return set(self.fates) <= {"kept"} and not self.added and not self.static_to_child


@st.composite
def changes(draw: st.DrawFn) -> Change:
    form = draw(st.sampled_from(["flax", "orbax", "1.6"]))
    # 1.6's layout refuses removed fields: mostly others there, so that most cases restore.
    fate = st.sampled_from(FATES if form != "1.6" else ("kept", "renamed", "kept", "removed"))
    fates = tuple(draw(st.lists(fate, min_size=1, max_size=3)))
    kept = sum(fate in ("kept", "renamed") for fate in fates)
    added = draw(st.integers(0 if kept else 1, 2))  # The new class has a child.
    static_to_child = draw(st.booleans())
    count = kept + added + static_to_child
    order = tuple(draw(st.permutations(range(count))))
    return Change(
        fates,
        added,
        static_to_child,
        order,
        declared=draw(st.sampled_from([True, True, True, False])),
        model=draw(st.sampled_from(["alone", "nested", "list", "stacked"])),
        optimizer=draw(st.sampled_from(["none", "adam", "multisteps", "train state"])),
        abstract=draw(st.booleans()),
        format=form,
    )


def default_of(name: str) -> float:
    """The value an added field's default fills its array with."""
    return 60.0 if name == "cfg" else 50.0 + int(name[1:])


def classes(change: Change) -> tuple[type, type]:
    """The class as it was and as it is, both named `Leaf`, from their source."""
    old = ["@jdc.pytree_dataclass", "class Leaf:"]
    old += [f"    f{i}: jax.Array" for i in range(len(change.fates))]
    if change.static_to_child:
        old.append("    cfg: jdc.Static[int] = 1")
    new = ["@jdc.pytree_dataclass", "class Leaf:"]
    added: list[str] = []
    renamed: dict[str, str] = {}
    for name, was in change.new_fields():
        if was is None:
            new.append(f"    {name}: jax.Array = jnp.full(2, {default_of(name)})")
            added.append(name)
        else:
            new.append(f"    {name}: jax.Array = jnp.zeros(2)")
            if name != was:
                renamed[name] = was
    removed = []
    for i, fate in enumerate(change.fates):
        if fate == "static":
            new.append(f"    f{i}: jdc.Static[int] = 7")
        if fate in ("removed", "static"):
            removed.append(f"f{i}")
    if change.declared:
        was = {old_name: name for name, old_name in change.new_fields() if old_name is not None}
        order = [was[f"f{i}"] for i in range(len(change.fates)) if f"f{i}" in was]
        new.append(
            f"    __jdc_evolution__ = jdc.Evolution(added={added}, renamed={renamed}, "
            f"removed={removed}, v1_6_order={order})"
        )
    built = []
    for source in (old, new):
        namespace: dict[str, Any] = {"jax": jax, "jnp": jnp, "jdc": jdc}
        exec("\n".join(source), namespace)
        built.append(namespace["Leaf"])
    return built[0], built[1]


@jdc.pytree_dataclass
class Outer:
    """Holds a `Leaf` of either version, unchanged itself."""

    inner: Any
    extra: jax.Array


@jdc.pytree_dataclass
class TrainState:
    """A train state around the model and its optimizer state, unchanged itself."""

    params: Any
    opt_state: Any
    step: jax.Array


def model(change: Change, make: Any) -> Any:
    """The model around the class: `make(i)` is the i-th instance of it."""
    if change.model == "alone":
        return make(0)
    if change.model == "nested":
        return Outer(make(0), jnp.arange(3.0))
    if change.model == "list":
        return [make(0), make(1)]
    return jax.vmap(make)(jnp.arange(3))  # stacked: each leaf has a leading axis of 3


def with_optimizer(change: Change, params: Any, train: bool) -> Any:
    """(params, optimizer state), after one update when `train` (so moments are not zeros)."""
    if change.optimizer == "none":
        return params
    tx = optax.adam(1e-2)
    if change.optimizer == "multisteps":
        tx = optax.MultiSteps(tx, every_k_schedule=3)
    state = tx.init(params)
    if train:
        grads = jax.tree.map(lambda leaf: jnp.cos(leaf) + 2.0, params)
        state = tx.update(grads, state, params)[1]
    if change.optimizer == "train state":
        return TrainState(params, state, jnp.asarray(int(train)))
    return (params, state)


def old_tree(change: Change, old: type) -> Any:
    def make(i: Any) -> Any:
        fields = {f"f{k}": jnp.arange(2.0) + 10.0 * k + 100.0 * i for k in range(len(change.fates))}
        return old(**fields)

    return with_optimizer(change, model(change, make), train=True)


def target_tree(change: Change, new: type) -> Any:
    """The target: added fields hold values other than their defaults, static fields 3."""

    def make(i: Any) -> Any:
        values: dict[str, Any] = {
            name: jnp.full(2, -1.0 - default_of(name)) if was is None else jnp.zeros(2)
            for name, was in change.new_fields()
        }
        values |= {f"f{k}": 3 for k, fate in enumerate(change.fates) if fate == "static"}
        return new(**values)

    tree = with_optimizer(change, model(change, make), train=False)
    if not change.abstract:
        return tree
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype), tree)


# -- the reference ------------------------------------------------------------------------------


def is_named_tuple(node: object) -> bool:
    return isinstance(node, tuple) and hasattr(node, "_fields")


def reference(change: Change, old: Any, target: Any, new: type, in_state: bool = False) -> Any:
    """What the restored tree must be, described (`describe`), from the old tree, the target
    and the change: each new field is the old field it was; an added one is the target's
    value, or where the target is abstract its default in the target's shape (outside an
    optimizer state); a static field is the target's."""
    if dataclasses.is_dataclass(old) and type(old).__name__ == "Leaf":
        olds = {f.name: getattr(old, f.name) for f in dataclasses.fields(old)}
        described: dict[str, Any] = {"": new}
        for f in dataclasses.fields(target):
            value = getattr(target, f.name)
            was = change.sources().get(f.name, "static")
            if was == "static":
                described[f.name] = value
            elif was is not None:
                described[f.name] = np.asarray(olds[was])
            elif isinstance(value, jax.ShapeDtypeStruct):
                if in_state:
                    raise Refused(f.name)
                described[f.name] = np.broadcast_to(default_of(f.name), value.shape)
            else:
                described[f.name] = np.asarray(value)
        return described
    if dataclasses.is_dataclass(old):  # Outer, TrainState: unchanged classes around it.
        fields = {
            f.name: reference(change, getattr(old, f.name), getattr(target, f.name), new, in_state)
            for f in dataclasses.fields(old)
        }
        return {"": type(old), **fields}
    if isinstance(old, list | tuple):
        in_state = in_state or is_named_tuple(old)
        items = [reference(change, o, t, new, in_state) for o, t in zip(old, target, strict=True)]
        return (type(old), items)
    return None if old is None else np.asarray(old)


class Refused(Exception):
    """The reference's refusal: an added field that an abstract optimizer state lacks."""


def describe(tree: Any) -> Any:
    """A tree as plain values: a dataclass as its class and fields, a container as its type
    and items, an array as a NumPy array."""
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        fields = {f.name: describe(getattr(tree, f.name)) for f in dataclasses.fields(tree)}
        return {"": type(tree), **fields}
    if isinstance(tree, list | tuple):
        return (type(tree), [describe(item) for item in tree])
    return None if tree is None else np.asarray(tree)


def assert_same(got: Any, want: Any, path: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for key in want:
            assert_same(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and got[0] is want[0] and len(got[1]) == len(want[1]), path
        for i, (g, w) in enumerate(zip(got[1], want[1], strict=True)):
            assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want, err_msg=path)
        assert got.shape == want.shape, path
    else:
        assert got == want, path


# -- the formats ----------------------------------------------------------------------------------


def restored_by(orbax_layout: Any, state: Any) -> Any:
    """What orbax restores into `saved_layout`'s tree: the saved array under each key."""
    if isinstance(orbax_layout, Mapping):
        return {key: restored_by(value, state[key]) for key, value in orbax_layout.items()}
    if is_named_tuple(orbax_layout):
        return type(orbax_layout)(
            *(restored_by(getattr(orbax_layout, f), state[f]) for f in orbax_layout._fields)
        )
    if isinstance(orbax_layout, list | tuple):
        items = [restored_by(value, state[str(i)]) for i, value in enumerate(orbax_layout)]
        return type(orbax_layout)(items)
    return None if orbax_layout is None else np.asarray(state)


def restore(change: Change, old: Any, target: Any) -> Any:
    if change.format == "flax":
        return serialization.from_bytes(target, serialization.to_bytes(old))
    if change.format == "1.6":
        return jdc.from_v1_6_layout(target, jdc.v1_6_layout(old))
    state = serialization.to_state_dict(old)
    metadata = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype), state)
    return jdc.from_saved_layout(target, restored_by(jdc.saved_layout(target, metadata), state))


def refusal(change: Change) -> list[str] | None:
    """The names a refusal must mention (None: the restore must succeed), by the rules of each
    format (the serialization guide)."""
    if change.format == "1.6":
        if change.declared and {"removed", "static"} & set(change.fates):
            return []  # Positions cannot say where a removed field was.
        if not change.declared and len(change.new_fields()) != len(change.fates):
            return []  # 1.6's layout of the target has another number of children.
        return None  # Undeclared: by place (as in 1.6), `Change.sources`.
    if change.declared or change.changes_nothing_keyed():
        return None
    names = [name for name, was in change.new_fields() if name != was]
    names += [f"f{i}" for i, fate in enumerate(change.fates) if fate != "kept"]
    return names


def expected(change: Change, old: Any, target: Any, new: type) -> tuple[list[str] | None, Any]:
    """(the names a refusal must mention, or None), and the described tree a restore must give
    where it succeeds: `refusal`'s rules, `reference`'s tree and its refusals."""
    names = refusal(change)
    try:
        want = reference(change, old, target, new)
    except Refused as refused:
        return names if names is not None else [str(refused)], None
    if change.abstract and change.format == "flax" and (change.added or change.static_to_child):
        first = next(name for name, was in change.new_fields() if was is None)
        names = names if names is not None else [first]  # Refused at the first.
    return names, want


def check(restoring: Any, names: list[str] | None, want: Any) -> None:
    """`restoring()` gives `want` (described), or is refused naming each of `names`."""
    if names is not None:
        with pytest.raises(ValueError) as caught:
            restoring()
        for name in names:
            assert repr(name) in str(caught.value), (name, str(caught.value))
        return
    assert_same(describe(restoring()), want)


@pytest.mark.filterwarnings("ignore::UserWarning")  # optax on an abstract target
@fixed
@settings(ORACLE)
@given(changes())
def test_a_restore_is_the_reference_or_refused_naming_every_difference(change: Change) -> None:
    old_class, new_class = classes(change)
    old, target = old_tree(change, old_class), target_tree(change, new_class)
    names, want = expected(change, old, target, new_class)
    event(f"{change.format}: {'refused' if names is not None else 'restored'}")
    check(lambda: restore(change, old, target), names, want)
