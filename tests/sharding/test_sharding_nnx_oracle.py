"""Sharding specs against flax nnx, over generated models (issue 38).

Hypothesis generates rules, the fields of a layer (declared logical axes and shapes), a stack
around it (none, one level, or two nested), and an optimizer (adam, adafactor, `MultiSteps`
of adam). The same model is written twice: as pytree dataclasses with `jdc.Sharded`
declarations (the stacks declared on the fields that hold them), and as flax nnx modules whose
parameters carry `sharding=` metadata, stacked by `nnx.vmap(transform_metadata=
{nnx.PARTITION_NAME: ...})` and optimized by `nnx.Optimizer`. Every spec of the parameters and
of the optimizer state must be the one nnx gives (`nnx.get_partition_spec`, which JAX must
accept on the mesh: rank, each mesh axis once, axes the mesh has, sizes it divides), or both
must refuse. Everything is abstract (`jax.eval_shape`, `nnx.eval_shape`, an `AbstractMesh`):
no devices, no arrays.

What is not generated, being documented differences (docs/design/sharding.md): a logical name on
two dimensions of one array (refused here, as flax linen does; nnx takes it when it maps to
None), several rules for one name (here the first that fits, as linen; nnx keeps the last),
and undeclared arrays inside a stack (here they get the stack's axes; nnx leaves them
unsharded).
"""

from typing import Any

import jax
import jax.numpy as jnp
import optax
import pytest
from helpers import abstract_mesh
from hypothesis import event, given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding, PartitionSpec

import jax_dataclasses as jdc

nnx = pytest.importorskip("flax.nnx")
if not hasattr(nnx, "use_eager_sharding"):
    pytest.skip("flax 0.12's sharding metadata", allow_module_level=True)

MESH = abstract_mesh(data=2, model=4)
LAYER_AXES = ["embed", "hidden", "heads"]
STACK_AXES = [["layers", None], ["stage", None]]  # inner, outer
TARGETS: list[Any] = [None, None, None, "data", "model", "model", ("data", "model"), "no rule"]
"""What a rule maps a name to ("no rule": none, so the name must be a mesh axis), weighted so
that most models fit and every kind of refusal still comes up."""
OPTIMIZERS = {
    "adam": lambda: optax.adam(1e-3),
    "adafactor": lambda: optax.adafactor(1e-3),
    "multisteps": lambda: optax.MultiSteps(optax.adam(1e-3), 2),
}


@st.composite
def axes_and_shape(draw: st.DrawFn) -> tuple[tuple[str | None, ...], tuple[int, ...]]:
    """A field's declared axes (a logical name at most once, mesh axes too) and its shape."""
    rank = draw(st.integers(1, 2))
    names = draw(st.permutations([*LAYER_AXES, "data", "model", None, None, None]))
    return tuple(names[:rank]), tuple(
        draw(st.sampled_from([1, 8, 8, 128, 128])) for _ in names[:rank]
    )


CASES = st.fixed_dictionaries(
    {
        "rules": st.fixed_dictionaries(
            {name: st.sampled_from(TARGETS) for name in [*LAYER_AXES, "layers", "stage"]}
        ),
        "fields": st.lists(axes_and_shape(), min_size=1, max_size=3),
        "stacks": st.lists(st.tuples(st.sampled_from([2, 4, 8]), st.booleans()), max_size=2),
        "optimizer": st.sampled_from(sorted(OPTIMIZERS)),
    }
)


def rules_of(case: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(name, target) for name, target in case["rules"].items() if target != "no rule"]


def stack_names(case: dict[str, Any]) -> list[str | None]:
    """The axis of each stack, innermost first."""
    return [STACK_AXES[level][0 if named else 1] for level, (_, named) in enumerate(case["stacks"])]


# -- ours -------------------------------------------------------------------------------------


def ours(case: dict[str, Any]) -> dict[tuple[object, ...], tuple[object, ...]] | None:
    """Each leaf's spec (padded to its rank) by key path, or None where ours refuses."""
    fields = {f"f{i}": jdc.Sharded[jax.Array, *axes] for i, (axes, _) in enumerate(case["fields"])}
    classes = [dataclass("Block", fields)]
    for name in stack_names(case):  # Each level holds the one before, on a declared field.
        classes.append(dataclass("Stack", {"layers": jdc.Sharded[classes[-1], name]}))
    model_class = dataclass("Model", {"body": classes[-1], "t0": jax.Array})
    lead = tuple(reversed([size for size, _ in case["stacks"]]))  # Outermost first.

    def build() -> Any:
        body = classes[0](*[jnp.zeros((*lead, *shape)) for _, shape in case["fields"]])
        for stack in classes[1:]:
            body = stack(body)
        return model_class(body, jnp.zeros(8))

    model = jax.eval_shape(build)
    tree = {"model": model, "opt": jax.eval_shape(OPTIMIZERS[case["optimizer"]]().init, model)}
    try:
        specs = jdc.partition_specs(tree, rules_of(case), mesh=MESH)
    except jdc.ShardingDeclarationError:
        return None
    return by_path(specs, tree)


def dataclass(name: str, annotations: dict[str, Any]) -> type:
    return jdc.pytree_dataclass(type(name, (), {"__annotations__": annotations}))


# -- flax nnx ---------------------------------------------------------------------------------


class NnxBlock(nnx.Module):  # type: ignore[misc,name-defined]
    def __init__(self, fields: list[tuple[tuple[str | None, ...], tuple[int, ...]]]) -> None:
        for i, (axes, shape) in enumerate(fields):
            setattr(self, f"f{i}", nnx.Param(jnp.zeros(shape), out_sharding=axes))


class NnxStack(nnx.Module):  # type: ignore[misc,name-defined]
    def __init__(self, make: Any, size: int, name: str | None) -> None:
        stacked = nnx.vmap(
            lambda _: make(), in_axes=0, out_axes=0, transform_metadata={nnx.PARTITION_NAME: name}
        )
        self.layers = stacked(jnp.arange(size))


class NnxModel(nnx.Module):  # type: ignore[misc,name-defined]
    def __init__(self, case: dict[str, Any]) -> None:
        def make() -> Any:
            return NnxBlock(case["fields"])

        for (size, _), name in zip(case["stacks"], stack_names(case), strict=True):
            make = lambda make=make, size=size, name=name: NnxStack(make, size, name)  # noqa: E731
        self.body = make()
        self.t0 = nnx.Param(jnp.zeros(8))


def nnxs(case: dict[str, Any]) -> dict[tuple[object, ...], tuple[object, ...]] | None:
    """nnx's spec of each leaf by key path, or None where nnx or JAX refuses one."""
    optimizer = OPTIMIZERS[case["optimizer"]]()
    with nnx.use_eager_sharding(False):
        model = nnx.eval_shape(lambda: NnxModel(case))
        opt = nnx.eval_shape(lambda: nnx.Optimizer(NnxModel(case), optimizer, wrt=nnx.Param))
    tree = {"model": nnx.state(model), "opt": nnx.state(opt)["opt_state"]}
    try:
        with nnx.logical_axis_rules(rules_of(case)):
            specs = nnx.get_partition_spec(tree)
    except Exception:  # JAX's refusals have several types (DuplicateSpecError).
        return None
    found = by_path(specs, tree)
    for path, spec in found.items():
        shape = shapes(tree)[path]
        if len(spec) > len(shape):
            return None  # JAX refuses a spec longer than the array's rank.
        try:
            NamedSharding(MESH, PartitionSpec(*spec)).shard_shape(shape)
        except Exception:  # Duplicate or unknown mesh axes, indivisible sizes.
            return None
    return found


# -- comparing --------------------------------------------------------------------------------


def key_names(path: tuple[Any, ...]) -> tuple[object, ...]:
    """A key path as names and indices, without nnx's `.value` of a variable."""
    names = [getattr(key, "name", getattr(key, "key", getattr(key, "idx", key))) for key in path]
    return tuple(name for name in names if name != "value")


def shapes(tree: Any) -> dict[tuple[object, ...], tuple[int, ...]]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {key_names(path): tuple(leaf.shape) for path, leaf in leaves}


def by_path(specs: Any, tree: Any) -> dict[tuple[object, ...], tuple[object, ...]]:
    """Each spec padded with None to its array's rank (nnx and JAX drop trailing Nones)."""
    ranks = {path: len(shape) for path, shape in shapes(tree).items()}
    flat = jax.tree_util.tree_flatten_with_path(
        specs, is_leaf=lambda x: isinstance(x, PartitionSpec)
    )[0]
    found = {key_names(path): tuple(spec) for path, spec in flat}
    return {path: (*spec, *(None,) * (ranks[path] - len(spec))) for path, spec in found.items()}


@settings(max_examples=200, deadline=None)
@given(case=CASES)
def test_every_spec_is_nnxs_or_both_refuse(case: dict[str, Any]) -> None:
    theirs = nnxs(case)
    mine = ours(case)
    outcome = "both refuse" if theirs is None else "the same specs"
    event(f"{outcome} ({case['optimizer']}, {len(case['stacks'])} stacks)")
    if theirs is None or mine is None:
        assert theirs is None and mine is None, (theirs, mine)
    else:
        assert mine == theirs
