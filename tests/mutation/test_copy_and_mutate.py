"""`copy_and_mutate`: structural copy, temporary per-context mutability, validation."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import gc
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_dataclasses as jdc
from jax_dataclasses import MutationValidationError, copy_and_mutate

FrozenInstanceError = dataclasses.FrozenInstanceError


@jdc.pytree_dataclass
class Foo:
    array: Any


@jdc.pytree_dataclass
class Bar:
    children: list[Foo]
    array: Any
    array_unchanged: Any
    name: jdc.Static[str] = "bar"


@jdc.pytree_dataclass
class Linear:
    w: Any
    b: Any


@jdc.pytree_dataclass
class Block:
    attn: Linear
    mlp: Linear
    params: dict[str, Any]
    width: jdc.Static[int] = 4


@jdc.pytree_dataclass
class Model:
    blocks: list[Block]
    head: tuple[Linear, ...]
    name: jdc.Static[str] = "model"


@jdc.pytree_dataclass(slots=True)
class Slotted:
    value: Any
    tag: jdc.Static[str] = "slotted"


@jdc.pytree_dataclass
class Node:
    value: Any
    next: Any = None


class Pair(NamedTuple):
    first: Any
    second: Any


class Wrapper:
    """A custom (non-dataclass) pytree node: one child, one piece of aux data."""

    def __init__(self, child: Any, label: str) -> None:
        self.child = child
        self.label = label


jax.tree_util.register_pytree_node(
    Wrapper,
    lambda w: ((w.child,), w.label),
    lambda label, children: Wrapper(children[0], label),
)


class Fresh:
    """A custom node whose flatten makes a new container on every call."""

    def __init__(self, x: Any) -> None:
        self.x = x


jax.tree_util.register_pytree_node(
    Fresh, lambda f: ([[f.x]], None), lambda _, children: Fresh(children[0][0])
)


def linear(n: int = 3, fill: float = 1.0) -> Linear:
    return Linear(w=jnp.full((n, n), fill, jnp.float32), b=jnp.full((n,), fill, jnp.float32))


def model(n_blocks: int = 3) -> Model:
    blocks = [
        Block(attn=linear(), mlp=linear(), params={"scale": jnp.ones(()), "bias": [jnp.zeros(2)]})
        for _ in range(n_blocks)
    ]
    return Model(blocks=blocks, head=(linear(2), linear(2)))


def bar() -> Bar:
    return Bar(children=[Foo(array=np.zeros(3))], array=np.ones(3), array_unchanged=np.ones(3))


def nodes(tree: Any) -> list[Any]:
    """Every pytree node (not leaf) of `tree`, outermost first."""
    found: list[Any] = []

    def visit(x: Any) -> bool:
        if not jax.tree_util.all_leaves([x]):
            found.append(x)
        return False

    jax.tree_util.tree_flatten(tree, is_leaf=visit)
    return found


def assert_same_leaves(a: Any, b: Any) -> None:
    """Same structure, and every leaf is the very same object."""
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        assert x is y


# ------------------------------------------------------------------------------ the copy


def test_copy_has_new_nodes_and_the_same_leaves() -> None:
    original = model()
    with copy_and_mutate(original) as copy:
        assert_same_leaves(copy, original)
        originals = {id(node) for node in nodes(original) if node is not None and node != ()}
        for node in nodes(copy):
            if node is not None and node != ():
                assert id(node) not in originals, f"{type(node).__name__} was not copied"
        assert copy.blocks is not original.blocks
        assert copy.blocks[0].params is not original.blocks[0].params
        assert copy.blocks[0].params["bias"] is not original.blocks[0].params["bias"]
        assert copy.head is not original.head
        assert copy.name is original.name  # Static values are carried over as they are.
    assert_same_leaves(copy, original)


def test_dict_keeps_its_key_order() -> None:
    tree = {"b": Foo(1.0), "a": Foo(2.0)}
    with copy_and_mutate(tree) as copy:
        copy["b"].array = 3.0
    assert list(copy) == ["b", "a"]
    assert copy["b"].array == 3.0
    assert tree["b"].array == 1.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: [Foo(1.0), Foo(2.0)],
        lambda: (Foo(1.0), [Foo(2.0)]),
        lambda: {"x": Foo(1.0), "y": {"z": Foo(2.0)}},
        lambda: Pair(Foo(1.0), Foo(2.0)),
        lambda: collections.OrderedDict(y=Foo(1.0), x=Foo(2.0)),
        lambda: collections.defaultdict(list, {"k": Foo(1.0)}),
        lambda: Wrapper(Foo(1.0), "label"),
    ],
    ids=["list", "tuple", "dict", "namedtuple", "ordereddict", "defaultdict", "custom-node"],
)
def test_any_pytree_is_copied_and_its_dataclasses_made_mutable(make: Any) -> None:
    original = make()
    before = jax.tree_util.tree_leaves(original)
    with copy_and_mutate(original) as copy:
        assert type(copy) is type(original)
        assert copy is not original
        foos = [x for x in nodes(copy) if isinstance(x, Foo)]
        assert foos
        for foo in foos:
            foo.array = 5.0
    assert jax.tree_util.tree_structure(copy) == jax.tree_util.tree_structure(original)
    assert jax.tree_util.tree_leaves(copy) == [5.0] * len(foos)
    assert jax.tree_util.tree_leaves(original) == before
    for foo in foos:
        with pytest.raises(FrozenInstanceError):
            foo.array = 6.0


def test_custom_node_aux_data_is_kept() -> None:
    with copy_and_mutate(Wrapper(Foo(1.0), "label")) as copy:
        copy.child.array = 2.0
    assert copy.label == "label"
    assert copy.child.array == 2.0


def test_containers_made_by_a_flatten_are_not_confused() -> None:
    # Each Fresh flattens to a new list; once one is freed, the next may reuse its id.
    original = [Fresh(Foo(float(i))) for i in range(20)]
    with copy_and_mutate(original) as copy:
        for fresh in copy:
            fresh.x.array += 100.0
    assert [fresh.x.array for fresh in copy] == [100.0 + i for i in range(20)]
    assert [fresh.x.array for fresh in original] == [float(i) for i in range(20)]


def test_leaf_and_none_inputs_are_returned_as_they_are() -> None:
    array = jnp.ones(3)
    with copy_and_mutate(array) as copy:
        assert copy is array
    with copy_and_mutate(None) as nothing:
        assert nothing is None


def test_shared_nodes_get_a_copy_per_key_path() -> None:
    # A pytree is a tree: JAX never keeps sharing (not after jit, not after tree_map).
    layer = linear()
    original = Model(blocks=[], head=(layer, layer, layer))
    for tree in (original, jax.jit(lambda m: m)(original)):
        with copy_and_mutate(tree) as copy:
            assert len({id(head) for head in copy.head}) == 3
            assert all(new.w is old.w for new, old in zip(copy.head, tree.head, strict=True))
            copy.head[0].b = jnp.zeros(3)
        assert copy.head[0].b.tolist() == [0.0] * 3
        assert copy.head[1].b is tree.head[1].b and copy.head[2].b is tree.head[2].b
    assert original.head[0].b is layer.b and layer.b.tolist() == [1.0] * 3


def test_shared_containers_get_a_copy_per_key_path() -> None:
    shared: list[Any] = [Foo(1.0)]
    params = {"a": shared, "b": shared}
    with copy_and_mutate(params) as copy:
        assert copy["a"] is not copy["b"] and copy["a"][0] is not copy["b"][0]
        copy["a"][0].array = 2.0
    assert (copy["a"][0].array, copy["b"][0].array, shared[0].array) == (2.0, 1.0, 1.0)


def test_a_shared_subtree_becomes_a_tree_of_distinct_copies() -> None:
    bottom = Node(jnp.zeros(()))
    node: Any = bottom
    for _ in range(8):  # 2**8 paths to the bottom
        node = Node((node, node))
    with copy_and_mutate(node) as copy:
        bottoms = [leaf for leaf in jax.tree_util.tree_leaves(copy)]
        assert len(bottoms) == 2**8 and all(leaf is bottom.value for leaf in bottoms)
        first = copy
        while isinstance(first.value, tuple):
            first = first.value[0]
        first.value = jnp.ones(())
    assert jax.tree_util.tree_leaves(copy)[:2] == [1.0, 0.0]
    assert bottom.value == 0.0


def test_copying_a_cycle_names_the_key_path_where_it_closes() -> None:
    with copy_and_mutate(Node(1.0, Node(2.0)), validate=False) as first:
        first.next.next = first  # A cycle through dataclasses only: allowed here, no hang.
        with (
            pytest.raises(
                ValueError, match=r"cycle: the \S*Node at key path \.next\.next is .* \(the root\)"
            ),
            copy_and_mutate(first),
        ):
            pass
        first.next.next = None
        holder: list[Any] = []
        first.value = (holder,)
        holder.append(first.value)  # A cycle through a tuple and a list.
        with (
            pytest.raises(ValueError, match=r"tuple at key path \.value\[0\]\[0\] .* at \.value\."),
            copy_and_mutate(first),
        ):
            pass


def test_deep_nesting_is_copied() -> None:
    node: Any = Node(jnp.zeros(()))
    for _ in range(800):  # 1.6, which copied with tree_map, handled this depth too
        node = Node(0.0, node)
    with copy_and_mutate(node) as copy:
        tail = copy
        while tail.next is not None:
            tail = tail.next
        tail.value = jnp.ones(())
    assert jax.tree_util.tree_leaves(copy)[-1] == 1.0
    assert jax.tree_util.tree_leaves(node)[-1] == 0.0


# -------------------------------------------------------------------- mutation and freezing


def test_mutate_fields_at_any_depth_and_original_is_unchanged() -> None:
    original = bar()
    children, array, kept = original.children, original.array, original.array_unchanged
    child_array = original.children[0].array
    with pytest.raises(FrozenInstanceError):
        original.array = np.zeros(3)
    with copy_and_mutate(original) as copy:
        copy.array = np.zeros(3)
        copy.children[0].array = np.ones(3)
        copy.name = "renamed"
    np.testing.assert_array_equal(copy.array, np.zeros(3))
    np.testing.assert_array_equal(copy.children[0].array, np.ones(3))
    assert copy.array_unchanged is kept
    assert copy.name == "renamed"
    # The original: same objects, same values.
    assert original.children is children
    assert original.children[0].array is child_array
    assert original.array is array
    assert original.name == "bar"
    np.testing.assert_array_equal(original.array, np.ones(3))
    np.testing.assert_array_equal(original.children[0].array, np.zeros(3))


def test_flatten_and_jit_see_the_new_values() -> None:
    original = model()
    with copy_and_mutate(original) as copy:
        copy.blocks[1].mlp.w = jnp.full((3, 3), 7.0)
        copy.name = "edited"
        leaves, treedef = jax.tree_util.tree_flatten(copy)
    assert any(leaf is copy.blocks[1].mlp.w for leaf in leaves)
    assert treedef != jax.tree_util.tree_structure(original)  # The static name changed.
    assert jax.jit(lambda m: m.blocks[1].mlp.w.sum())(copy) == 63.0
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert rebuilt.name == "edited"
    assert rebuilt.blocks[1].mlp.w is copy.blocks[1].mlp.w


def test_everything_is_frozen_again_after_the_block() -> None:
    with copy_and_mutate(model()) as copy:
        copy.blocks[0].attn.b = jnp.zeros(3)
    for obj, name, value in [
        (copy, "name", "x"),
        (copy.blocks[0], "width", 1),
        (copy.blocks[0].attn, "b", jnp.ones(3)),
        (copy.head[1], "w", jnp.ones((2, 2))),
    ]:
        with pytest.raises(FrozenInstanceError, match=type(obj).__qualname__):
            setattr(obj, name, value)


def test_exception_in_the_block_propagates_and_refreezes() -> None:
    original = bar()
    with pytest.raises(KeyError, match="boom"), copy_and_mutate(original) as copy:
        copy.array = np.zeros(3)
        raise KeyError("boom")
    with pytest.raises(FrozenInstanceError):
        copy.array = np.ones(3)
    with pytest.raises(FrozenInstanceError):
        copy.children[0].array = np.ones(3)
    np.testing.assert_array_equal(original.array, np.ones(3))


def test_validation_error_in_the_block_propagates_and_refreezes() -> None:
    with pytest.raises(MutationValidationError), copy_and_mutate(bar()) as copy:
        copy.array = np.ones(4)
    with pytest.raises(FrozenInstanceError):
        copy.array = np.ones(3)


def test_original_stays_frozen_inside_the_block() -> None:
    original = bar()
    with copy_and_mutate(original):
        with pytest.raises(FrozenInstanceError):
            original.array = np.zeros(3)
        with pytest.raises(FrozenInstanceError):
            original.children[0].array = np.zeros(3)


def test_delete_is_refused() -> None:
    with copy_and_mutate(bar()) as copy:
        with pytest.raises(FrozenInstanceError, match=r"'array'.*Bar"):
            del copy.array
        assert hasattr(copy, "array")


@pytest.mark.parametrize("validate", [True, False])
def test_non_field_attribute_is_refused(validate: bool) -> None:
    refused = pytest.raises(FrozenInstanceError, match=r"'extra' of Bar: it is not a field")
    with copy_and_mutate(bar(), validate=validate) as copy, refused:
        copy.extra = 1  # type: ignore[attr-defined]
    assert not hasattr(copy, "extra")


def test_slots_class() -> None:
    original = [Slotted(jnp.zeros(2))]
    with copy_and_mutate(original) as copy:
        copy[0].value = jnp.ones(2)
        copy[0].tag = "changed"
    assert copy[0].tag == "changed"
    np.testing.assert_array_equal(jax.tree_util.tree_leaves(copy)[0], jnp.ones(2))
    np.testing.assert_array_equal(original[0].value, jnp.zeros(2))
    assert original[0].tag == "slotted"
    with pytest.raises(FrozenInstanceError):
        copy[0].value = jnp.zeros(2)


def test_slots_subclass_of_a_dict_class() -> None:
    @jdc.pytree_dataclass
    class Base:
        x: Any

    @jdc.pytree_dataclass(slots=True)
    class Derived(Base):
        y: Any
        tag: jdc.Static[str] = "derived"

    with copy_and_mutate([Derived(1.0, 2.0)]) as copy:
        copy[0].y = 3.0
        copy[0].x = 4.0
    assert (copy[0].x, copy[0].y, copy[0].tag) == (4.0, 3.0, "derived")
    assert jax.tree_util.tree_leaves(copy) == [4.0, 3.0]


def test_replace_a_whole_sub_dataclass() -> None:
    original = model()
    replacement = linear(fill=5.0)
    with copy_and_mutate(original) as copy:
        copy.blocks[2].attn = replacement
        assert copy.blocks[2].attn is replacement
        # Only objects of the copy are mutable: the assigned object is someone else's.
        with pytest.raises(FrozenInstanceError):
            copy.blocks[2].attn.w = jnp.zeros((3, 3))
    assert copy.blocks[2].attn is replacement
    assert original.blocks[2].attn is not replacement


def test_mutate_a_list_of_sub_modules() -> None:
    original = model(2)
    with copy_and_mutate(original, validate=False) as copy:
        copy.blocks.append(copy.blocks[0])
        copy.blocks = copy.blocks[::-1]
    assert len(copy.blocks) == 3
    assert len(original.blocks) == 2


def test_static_field_holding_a_non_frozen_plain_dataclass() -> None:
    @dataclasses.dataclass
    class Config:  # Not frozen: unhashable, which static fields warn about.
        a: int
        b: int

    @jdc.pytree_dataclass
    class WithConfig:
        arrays: dict[str, Any]
        config: jdc.Static[Config]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jdc.StaticFieldWarning)
        original = WithConfig(arrays={"a": np.zeros(3)}, config=Config(1, 2))
        with copy_and_mutate(original) as copy:
            copy.config = Config(5, 6)
    assert copy.config == Config(5, 6)
    assert original.config == Config(1, 2)
    assert jax.tree_util.tree_structure(copy) != jax.tree_util.tree_structure(original)


def test_static_field_checks_only_the_static_rules() -> None:
    @jdc.pytree_dataclass
    class Labelled:  # Local: static-value warnings are issued once per class and field.
        value: Any
        label: jdc.Static[Any] = "label"

    with copy_and_mutate(Labelled(np.zeros(2))) as copy:
        copy.label = 3  # Any good static value, whatever the old one was.
        with pytest.warns(jdc.StaticFieldWarning, match=r"static field 'label' of .*Labelled"):
            copy.label = ["unhashable"]
    assert copy.label == ["unhashable"]
    with copy_and_mutate(Labelled(np.zeros(2))) as copy:
        refused = pytest.raises(
            TypeError, match=r"static field 'label' of .*Labelled holds a traced"
        )
        with refused:
            jax.jit(lambda x: setattr(copy, "label", x))(jnp.ones(2))


def test_validate_false_accepts_anything() -> None:
    original = model(1)
    with copy_and_mutate(original, validate=False) as copy:
        copy.blocks[0].attn.w = jnp.ones((7,), jnp.int8)
        copy.blocks[0].params = None  # type: ignore[assignment]
        copy.head = ()
        copy.name = jnp.ones(2)  # type: ignore[assignment]  # Not even the static checks.
    assert copy.blocks[0].attn.w.shape == (7,)
    assert copy.blocks[0].params is None
    assert copy.head == ()


def test_nested_blocks() -> None:
    original = model(2)
    with copy_and_mutate(original) as outer:
        outer.name = "outer"
        with copy_and_mutate(outer.blocks[0], validate=False) as inner:
            inner.width = 9
            inner.attn.w = jnp.ones(1)  # Not validated: the inner block says so.
            outer.blocks[1].width = 7  # The outer copy is still mutable.
            with pytest.raises(MutationValidationError):
                outer.blocks[1].attn.w = jnp.ones(1)  # Still validated: the outer block.
        with pytest.raises(FrozenInstanceError):
            inner.width = 10
        outer.blocks[0].width = 8
    assert (inner.width, outer.blocks[0].width, outer.blocks[1].width) == (9, 8, 7)
    assert outer.blocks[0].attn.w.shape == (3, 3)
    with pytest.raises(FrozenInstanceError):
        outer.name = "after"


def test_blocks_closed_out_of_order_revoke_only_their_own_objects() -> None:
    def editing(value: float) -> Any:
        with copy_and_mutate(Foo(0.0), validate=False) as copy:
            yield copy
            copy.array = value  # this block is still open, whatever closed meanwhile
            yield copy

    first, second = editing(1.0), editing(2.0)
    first_copy, second_copy = next(first), next(second)
    next(first)
    first.close()  # the first block ends before the second
    next(second)
    assert (first_copy.array, second_copy.array) == (1.0, 2.0)
    second.close()
    with pytest.raises(FrozenInstanceError):
        second_copy.array = 3.0

    outer_block, inner_block = copy_and_mutate(Foo(0.0)), copy_and_mutate(Foo(0.0))
    outer, inner = outer_block.__enter__(), inner_block.__enter__()
    outer_block.__exit__(None, None, None)  # by hand, out of order
    inner.array = 5.0
    with pytest.raises(FrozenInstanceError):
        outer.array = 5.0
    inner_block.__exit__(None, None, None)
    with pytest.raises(FrozenInstanceError):
        inner.array = 6.0


# ----------------------------------------------------------------- threads and async tasks


def test_threads_mutate_their_own_copies_concurrently() -> None:
    originals = [bar(), bar()]
    copies: list[Any] = [None, None]
    both_inside = threading.Barrier(2, timeout=30)
    tried = threading.Barrier(2, timeout=30)
    errors: list[BaseException] = []
    refused: list[str] = []

    def work(i: int) -> None:
        try:
            with copy_and_mutate(originals[i]) as copy:
                copies[i] = copy
                both_inside.wait()  # Both threads are inside their blocks now.
                copy.array = np.full(3, float(i))
                other = copies[1 - i]
                try:
                    other.array = np.full(3, 9.0)  # The other thread's copy.
                except FrozenInstanceError as error:
                    refused.append(str(error))
                try:
                    other.children[0].array = np.full(3, 9.0)
                except FrozenInstanceError as error:
                    refused.append(str(error))
                tried.wait()  # Keep both blocks open until both have tried.
                copy.children[0].array = np.full(3, float(i))
        except BaseException as error:  # Reported by the main thread.
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(refused) == 4
    assert all("frozen" in message for message in refused)
    for i in range(2):
        np.testing.assert_array_equal(copies[i].array, np.full(3, float(i)))
        np.testing.assert_array_equal(copies[i].children[0].array, np.full(3, float(i)))
        np.testing.assert_array_equal(originals[i].array, np.ones(3))


def test_object_escaping_to_another_thread_is_frozen_there() -> None:
    outcome: list[str] = []

    def try_assign(target: Foo) -> None:
        try:
            target.array = np.ones(3)
            outcome.append("assigned")
        except FrozenInstanceError:
            outcome.append("frozen")

    with copy_and_mutate(bar()) as copy:
        thread = threading.Thread(target=try_assign, args=(copy.children[0],))
        thread.start()
        thread.join()
        copy.children[0].array = np.ones(3)  # Still mutable here.
    assert outcome == ["frozen"]


def test_async_tasks_mutate_their_own_copies() -> None:
    async def main() -> list[str]:
        copies: dict[str, Any] = {}
        refused: list[str] = []
        both_inside = asyncio.Event()

        async def work(name: str, value: float) -> None:
            with copy_and_mutate(bar()) as copy:
                copies[name] = copy
                if len(copies) == 2:
                    both_inside.set()
                await both_inside.wait()
                copy.array = np.full(3, value)
                other = copies["b" if name == "a" else "a"]
                try:
                    other.array = np.full(3, -1.0)
                except FrozenInstanceError:
                    refused.append(name)
                await asyncio.sleep(0)
                copy.children[0].array = np.full(3, value)

        await asyncio.gather(work("a", 1.0), work("b", 2.0))
        for name, value in (("a", 1.0), ("b", 2.0)):
            np.testing.assert_array_equal(copies[name].array, np.full(3, value))
            np.testing.assert_array_equal(copies[name].children[0].array, np.full(3, value))
        return refused

    assert sorted(asyncio.run(main())) == ["a", "b"]


def test_task_started_inside_a_block_loses_permission_when_the_block_ends() -> None:
    async def main() -> tuple[str, str]:
        block_ended = asyncio.Event()
        copy_box: list[Any] = []

        async def child() -> tuple[str, str]:
            copy_box[0].array = np.zeros(3)  # The block is open: its context allows it.
            during = "assigned"
            await block_ended.wait()
            try:
                copy_box[0].array = np.ones(3)
                after = "assigned"
            except FrozenInstanceError as error:
                after = str(error)
            return during, after

        with copy_and_mutate(bar()) as copy:
            copy_box.append(copy)
            task = asyncio.create_task(child())  # Copies the current context.
            await asyncio.sleep(0)
        block_ended.set()
        return await task

    during, after = asyncio.run(main())
    assert during == "assigned"
    assert "block that made it mutable has ended" in after
    assert "Bar" in after


def test_assigning_a_property_is_refused_without_running_it() -> None:
    @jdc.pytree_dataclass
    class Vector:
        x: jax.Array

        @property
        def norm(self) -> jax.Array:
            raise AssertionError("the getter must not run")

    refused = pytest.raises(dataclasses.FrozenInstanceError, match=r"'norm' of .*Vector")
    with copy_and_mutate(Vector(jnp.ones(2))) as vector, refused:
        vector.norm = jnp.ones(())  # type: ignore[misc]


@pytest.mark.parametrize(
    ("edit", "what", "path"),
    [
        (
            lambda m: m.blocks.__setitem__(0, jdc.replace(m.blocks[0], attn=linear(4))),
            "shape",
            ".blocks[0].attn.w",
        ),
        (
            lambda m: m.blocks[1].params.__setitem__("scale", jnp.ones((), jnp.int32)),
            "dtype",
            ".blocks[1].params['scale']",
        ),
        (lambda m: m.blocks.append(model(1).blocks[0]), "tree structure", ".blocks"),
        (lambda m: m.blocks[2].params["bias"].pop(), "tree structure", ".blocks[2].params['bias']"),
        (
            lambda m: m.blocks[0].params.__setitem__("new", jnp.ones(())),
            "tree structure",
            ".blocks[0].params",
        ),
    ],
    ids=["list item shape", "dict item dtype", "appended", "removed", "dict key added"],
)
def test_changes_inside_containers_of_the_copy_are_validated_when_the_block_ends(
    edit: Callable[[Model], object], what: str, path: str
) -> None:
    with pytest.raises(jdc.MutationValidationError) as info, copy_and_mutate(model()) as copy:
        edit(copy)
    message = str(info.value)
    assert "when the block ended, the copy" in message
    assert f"changed the {what} at key path {path}" in message
    with copy_and_mutate(model(), validate=False) as copy:
        edit(copy)


def test_items_moved_within_the_copy_or_detached_from_it_pass() -> None:
    with copy_and_mutate(model()) as copy:
        copy.blocks[0], copy.blocks[2] = copy.blocks[2], copy.blocks[0]  # same structure
        detached = copy.blocks
        copy.blocks = list(detached)  # validated as a field assignment
        detached.append(copy.blocks[0])  # no longer part of the copy
        copy.head = (copy.head[1], copy.head[0])
    assert len(copy.blocks) == 3


def test_a_block_may_change_static_values_deep_inside_containers() -> None:
    with copy_and_mutate(model()) as copy:
        copy.blocks[1] = jdc.replace(copy.blocks[1], width=8)
        copy.blocks[0].width = 16
        copy.blocks[2].params["bias"][0] = jnp.ones(2)  # same shape and dtype
    assert [block.width for block in copy.blocks] == [16, 8, 4]


@jdc.pytree_dataclass
class Scaled:
    x: jax.Array
    unit: jdc.Static[str] = "m"

    @property
    def doubled(self) -> jax.Array:
        return self.x * 2

    @doubled.setter
    def doubled(self, value: jax.Array) -> None:
        self.x = value / 2


def test_a_property_setter_runs_in_a_block_and_its_assignments_are_validated() -> None:
    with copy_and_mutate(Scaled(jnp.ones(2))) as scaled:
        scaled.doubled = jnp.full(2, 6.0)
    assert scaled.x.tolist() == [3.0, 3.0]
    refused = pytest.raises(jdc.MutationValidationError, match=r"field 'x' of Scaled")
    with copy_and_mutate(Scaled(jnp.ones(2))) as scaled, refused:
        scaled.doubled = jnp.ones(3)  # the setter's assignment changes the shape
    with copy_and_mutate(Scaled(jnp.ones(2)), validate=False) as scaled:
        scaled.doubled = jnp.ones(3)
    assert scaled.x.shape == (3,)


def test_a_property_setter_outside_a_block_is_refused() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"'doubled' of Scaled"):
        Scaled(jnp.ones(2)).doubled = jnp.ones(2)  # type: ignore[misc]


def test_a_task_that_outlives_the_block_does_not_keep_the_copy_alive() -> None:
    async def main() -> tuple[bool, bool, bool]:
        stop = asyncio.Event()
        with copy_and_mutate(bar()) as copy:
            copy.array = np.ones(3)
            ref = weakref.ref(copy)
            replaced = weakref.ref(copy.children[0])  # the copy's own child, then replaced
            copy.children = [Foo(np.ones(3))]
            task = asyncio.create_task(stop.wait())  # Copies the block's permission.
        del copy
        await asyncio.sleep(0)
        gc.collect()
        alive_during_task = ref() is not None
        replaced_alive = replaced() is not None
        stop.set()
        await task
        return alive_during_task, replaced_alive, task.done()

    assert asyncio.run(main()) == (False, False, True)


# -------------------------------------------------------------------------- validation


def _message_of(error: pytest.ExceptionInfo[MutationValidationError]) -> str:
    return str(error.value)


def test_validation_error_is_an_assertion_error() -> None:
    assert issubclass(MutationValidationError, AssertionError)
    with copy_and_mutate(bar()) as copy, pytest.raises(AssertionError):
        copy.children[0].array = np.ones(1)


def test_shape_error_names_class_field_key_path_and_shapes() -> None:
    with copy_and_mutate(model()) as copy, pytest.raises(MutationValidationError) as error:
        copy.blocks[0].params = {"scale": jnp.ones(()), "bias": [jnp.zeros(5)]}
    message = _message_of(error)
    assert "field 'params' of Block" in message
    assert "shape" in message
    assert "['bias'][0]" in message
    assert "Block.params['bias'][0]" in message
    assert "old f32[2]" in message
    assert "new f32[5]" in message
    assert "validate=False" in message


def test_dtype_error_names_class_field_and_dtypes() -> None:
    with copy_and_mutate(bar()) as copy, pytest.raises(MutationValidationError) as error:
        copy.children[0].array = np.ones(3, dtype=np.int32)
    message = _message_of(error)
    assert "field 'array' of Foo" in message
    assert "dtype" in message
    assert "old f64[3]" in message
    assert "new i32[3]" in message


def test_structure_error_names_the_differing_key_path() -> None:
    with copy_and_mutate(model()) as copy, pytest.raises(MutationValidationError) as error:
        copy.blocks[0].params = {
            "scale": jnp.ones(()),
            "bias": [jnp.zeros(2), jnp.zeros(2)],
        }
    message = _message_of(error)
    assert "field 'params' of Block" in message
    assert "tree structure" in message
    assert "key path ['bias']" in message
    assert "list of 1 → 2 items, [1] added" in message


def test_structure_error_for_a_nested_static_value() -> None:
    original = Model(blocks=[Block(linear(), linear(), {}, width=4)], head=())
    with copy_and_mutate(original) as copy, pytest.raises(MutationValidationError) as error:
        copy.blocks = [Block(linear(), linear(), {}, width=5)]
    message = _message_of(error)
    assert "key path [0]" in message
    assert "static field 'width' of Block: 4 → 5" in message


def test_structure_error_says_which_items_were_removed_or_added() -> None:
    original = Model(blocks=[Block(linear(), linear(), {}) for _ in range(24)], head=())
    with copy_and_mutate(original) as copy:
        with pytest.raises(MutationValidationError, match=r"list of 24 → 23 items, \[23\] removed"):
            copy.blocks = copy.blocks[:23]
        with pytest.raises(
            MutationValidationError, match=r"list of 24 → 26 items, \[24:26\] added"
        ):
            copy.blocks = [*copy.blocks, linear(), linear()]
    with (
        copy_and_mutate({"a": Foo({"a": 1.0})}) as copy,
        pytest.raises(MutationValidationError, match=r"dict keys 'b' added, keys 'a' removed"),
    ):
        copy["a"].array = {"b": 1.0}


def test_structure_error_names_no_positions_when_other_entries_changed_too() -> None:
    with copy_and_mutate(Foo([1.0, 2.0])) as copy, pytest.raises(MutationValidationError) as error:
        copy.array = [[1.0], 2.0, 3.0]
    assert "list of 2 → 3 items." in _message_of(error)


def test_structure_error_messages_are_bounded() -> None:
    with (
        copy_and_mutate(Bar([], 1.0, 1.0)) as copy,
        pytest.raises(MutationValidationError) as error,
    ):
        copy.children = [Foo(1.0)]
    with copy_and_mutate(Node(Pair(1.0, 2.0))) as node, pytest.raises(MutationValidationError):
        node.value = Pair(1.0, (2.0,))
    big = Model(blocks=[], head=(), name="x" * 10_000)
    with copy_and_mutate({"m": Foo(big)}) as copy, pytest.raises(MutationValidationError) as error:
        copy["m"].array = jdc.replace(big, name="y" * 10_000)
    assert len(_message_of(error)) < 1_000


def test_structure_error_at_the_top_of_the_field() -> None:
    with copy_and_mutate(bar()) as copy, pytest.raises(MutationValidationError) as error:
        copy.array = None
    message = _message_of(error)
    assert "field 'array' of Bar" in message
    assert "the field's value itself" in message
    assert "f64[3] → None" in message


SAME_LEAVES_OTHER_NODES = [
    (Pair(1.0, 2.0), (1.0, 2.0)),
    ((1.0, 2.0), Pair(1.0, 2.0)),
    ([], None),
    (None, ()),
    (None, {}),
    ({"a": 1.0}, collections.OrderedDict(a=1.0)),
    (Node(1.0), Pair(1.0, None)),
    (Wrapper(1.0, "w"), [1.0]),
]
"""Values whose leaves match one for one, in nodes of other types: JAX's treedefs differ."""


@pytest.mark.parametrize(("old", "new"), SAME_LEAVES_OTHER_NODES)
def test_structure_error_for_another_node_type_with_the_same_leaves(old: Any, new: Any) -> None:
    with copy_and_mutate(Node(old)) as copy, pytest.raises(MutationValidationError) as error:
        copy.value = new
    assert "changes the tree structure" in _message_of(error)
    assert "field 'value' of Node" in _message_of(error)


@pytest.mark.parametrize(("old", "new"), SAME_LEAVES_OTHER_NODES)
def test_block_end_error_for_another_node_type_with_the_same_leaves(old: Any, new: Any) -> None:
    with pytest.raises(MutationValidationError) as error, copy_and_mutate([old]) as copy:
        copy[0] = new
    assert "had changed the tree structure at key path [0]" in _message_of(error)


def test_structure_differences_are_reported_in_jax_key_order() -> None:
    """Dict keys in JAX's order (sorted), not their repr's: [9] before [10]."""
    old = {9: [jnp.zeros(1)], 10: [jnp.zeros(1)]}
    with copy_and_mutate(Node(old)) as copy, pytest.raises(MutationValidationError) as error:
        copy.value = {9: [jnp.zeros(1), 1.0], 10: []}
    assert "at key path [9]" in _message_of(error)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (np.zeros(3, np.float32), np.zeros(3, np.float64)),
        (np.zeros(3, np.float64), jnp.zeros(3, jnp.float32)),
        (np.zeros(3, np.int64), np.zeros(3, np.int32)),
        (np.zeros(3, np.uint64), np.zeros(3, np.uint32)),
        (np.zeros(3, np.complex128), np.zeros(3, np.complex64)),
        (jnp.zeros((), jnp.float32), 1.5),  # Python float into a 0-d float array.
        (jnp.zeros((), jnp.float32), 2),  # Python int keeps a float array float.
        (jnp.zeros((), jnp.int32), 2),
        (jnp.zeros((), jnp.bool_), True),
        (1.5, jnp.zeros((), jnp.float32)),
        (1, jnp.zeros((), jnp.int32)),
        (1.5, 2.5),
        (1.5, 2),
        (np.float64(1.0), 2.0),
        ("text", "other text"),  # Neither is array-like.
    ],
)
def test_compatible_leaves(old: Any, new: Any) -> None:
    with copy_and_mutate(Foo(old)) as copy:
        copy.array = new
    assert copy.array is new


@pytest.mark.parametrize(
    ("old", "new", "what", "old_text", "new_text"),
    [
        (np.zeros(3, np.float32), np.zeros(3, np.float16), "dtype", "f32[3]", "f16[3]"),
        (np.zeros(3, np.int32), np.zeros(3, np.uint32), "dtype", "i32[3]", "u32[3]"),
        (np.zeros(3, np.float32), np.zeros(3, np.int32), "dtype", "f32[3]", "i32[3]"),
        (jnp.zeros((), jnp.int32), 0.5, "dtype", "i32[]", "Python float"),
        (2, 0.5, "dtype", "Python int", "Python float"),
        (1.5, jnp.zeros((), jnp.int32), "dtype", "Python float", "i32[]"),
        (jnp.zeros(3), 1.0, "shape", "f32[3]", "Python float"),
        (np.zeros((2, 3)), np.zeros((3, 2)), "shape", "f64[2,3]", "f64[3,2]"),
        (np.zeros(3), "text", "leaf type", "f64[3]", "str"),
    ],
)
def test_incompatible_leaves(old: Any, new: Any, what: str, old_text: str, new_text: str) -> None:
    with copy_and_mutate({"leaf": Foo([old])}) as copy:
        with pytest.raises(MutationValidationError) as error:
            copy["leaf"].array = [new]
        assert copy["leaf"].array[0] is old
    message = _message_of(error)
    assert f"changes the {what} at key path [0] (Foo.array[0])" in message
    assert f"old {old_text}," in message
    assert f"new {new_text}." in message


def test_validation_inside_jit() -> None:
    @jax.jit
    def surgery(m: Model, w: jax.Array) -> Model:
        with copy_and_mutate(m) as copy:
            copy.blocks[1].mlp.w = w * 2
            copy.blocks[0].params = {"scale": 3.0, "bias": [jnp.ones(2)]}
        return copy

    original = model()
    result = surgery(original, jnp.ones((3, 3)))
    np.testing.assert_array_equal(result.blocks[1].mlp.w, jnp.full((3, 3), 2.0))
    assert result.blocks[0].params["scale"] == 3.0

    @jax.jit
    def bad(m: Model) -> Model:
        with copy_and_mutate(m) as copy:
            copy.blocks[1].mlp.w = m.blocks[1].mlp.w[0]
        return copy

    with pytest.raises(MutationValidationError, match=r"field 'w' of Linear.*f32\[3,3\]"):
        bad(original)

    @jax.jit
    def bad_dtype(m: Model) -> Model:
        with copy_and_mutate(m) as copy:
            copy.blocks[1].mlp.b = m.blocks[1].mlp.b.astype(jnp.int32)
        return copy

    with pytest.raises(MutationValidationError, match=r"dtype .*old f32\[3\], new i32\[3\]"):
        bad_dtype(original)


def test_python_scalars_are_validated_alike_inside_and_outside_jit() -> None:
    def surgery(foo: Foo) -> Foo:
        with copy_and_mutate(foo) as copy:
            copy.array = jnp.zeros((), jnp.float32)  # 1 promotes to float32: accepted.
        return copy

    def bad(foo: Foo) -> Foo:
        with copy_and_mutate(foo) as copy:
            copy.array = 0.5  # 0.5 does not fit an int: refused.
        return copy

    for run in (surgery, jax.jit(surgery)):
        assert run(Foo(1)).array.dtype == jnp.float32
    for run in (bad, jax.jit(bad)):
        with pytest.raises(MutationValidationError, match=r"field 'array' of Foo.*dtype"):
            run(Foo(1))


def test_weakly_typed_array_with_a_shape_keeps_its_dtype() -> None:
    weak = jnp.full((3,), 1.0)  # Weakly typed float32.
    with copy_and_mutate(Foo(weak)) as copy:
        copy.array = jnp.zeros(3, jnp.float32)
        with pytest.raises(
            MutationValidationError, match=r"old f32\[3\] \(weakly typed\), new f16"
        ):
            copy.array = jnp.zeros(3, jnp.float16)
    strong = Foo(jnp.zeros(3, jnp.float32))
    with (
        copy_and_mutate(strong) as copy,
        pytest.raises(MutationValidationError, match=r"old f32\[3\], new f16\[3\]"),
    ):
        copy.array = jnp.zeros(3, jnp.float16)


def test_assignments_are_checked_against_the_value_at_the_start_of_the_block() -> None:
    # Checked against the current value, a Python int would open the way to any dtype.
    with copy_and_mutate(Foo(jnp.zeros((), jnp.int32))) as copy:
        copy.array = 3  # fits int32
        with pytest.raises(
            MutationValidationError, match=r"field 'array' of Foo .*old i32\[\], new f32\[\]"
        ):
            copy.array = jnp.asarray(0.5, jnp.float32)
        copy.array = jnp.asarray(7, jnp.int32)
    assert copy.array.dtype == jnp.int32
    # ...and a float field that held a Python int for a moment still takes floats.
    with copy_and_mutate(Foo(jnp.zeros((), jnp.float32))) as copy:
        copy.array = 1
        copy.array = 0.01
    assert copy.array == 0.01
    # Nor through a nested object or a list of the copy, changed first.
    nested = Bar(children=[Foo(jnp.zeros((), jnp.int32))], array=jnp.zeros(()), array_unchanged=1)
    with copy_and_mutate(nested) as copy:
        copy.children[0].array = 3
        with pytest.raises(MutationValidationError, match=r"field 'children' of Bar .*dtype"):
            copy.children = [Foo(jnp.asarray(0.5, jnp.float32))]
        copy.children.append(Foo(jnp.zeros((), jnp.int32)))
        with pytest.raises(MutationValidationError, match=r"list of 1 → 2 items"):
            copy.children = [Foo(jnp.zeros((), jnp.int32)), Foo(jnp.zeros((), jnp.int32))]
        copy.children.pop()  # Else the block's end refuses the appended item.
    # A nested static field may change, but the whole node assigned again must match the original.
    with copy_and_mutate(Foo(bar())) as holder:
        holder.array.name = "renamed"
        with pytest.raises(MutationValidationError, match=r"static field 'name' of Bar"):
            holder.array = jdc.replace(bar(), name="renamed")
    # validate=False blocks nest inside and check nothing; the outer block still checks.
    with copy_and_mutate([Foo(jnp.zeros(2))]) as outer:
        with copy_and_mutate(outer[0], validate=False) as inner:
            inner.array = "anything"
        outer[0].array = jnp.ones(2)
        with pytest.raises(MutationValidationError, match=r"shape"):
            outer[0].array = jnp.ones(3)


def test_unchanged_identity_assignment_is_accepted() -> None:
    with copy_and_mutate(bar()) as copy:
        copy.children = copy.children
        copy.array = copy.array


# ------------------------------------------------------------------------- typed PRNG keys


@jdc.pytree_dataclass
class Rng:
    key: jax.Array
    keys: list[jax.Array]


def test_typed_prng_keys_validate_like_other_dtypes() -> None:
    state = Rng(jax.random.key(0), [jax.random.key(1), jax.random.key(2)])
    with copy_and_mutate(state) as copy:
        copy.key = jax.random.split(copy.key)[0]
        copy.keys = [jax.random.key(3), jax.random.key(4)]
        with pytest.raises(MutationValidationError, match=r"field 'key' of Rng .*dtype") as raw:
            copy.key = jax.random.PRNGKey(0)  # raw uint32 key data
        with pytest.raises(MutationValidationError, match=r"field 'key' of Rng .*dtype") as other:
            copy.key = jax.random.key(0, impl="rbg")
        with pytest.raises(MutationValidationError, match=r"field 'keys' of Rng.*\[1\]"):
            copy.keys = [jax.random.key(3), jax.random.PRNGKey(4)]
    assert "old key<fry>[]" in str(other.value) and "new key<rbg>[]" in str(other.value)
    assert "u32[2]" in str(raw.value)
    assert (
        jax.random.key_data(copy.keys[0]).tolist()
        == jax.random.key_data(jax.random.key(3)).tolist()
    )


def test_typed_prng_keys_validate_under_jit() -> None:
    @jax.jit
    def advance(state: Rng) -> Rng:
        with copy_and_mutate(state) as copy:
            copy.key, copy.keys[0] = jax.random.split(state.key)
        return copy

    state = advance(Rng(jax.random.key(0), [jax.random.key(1)]))
    assert jax.dtypes.issubdtype(state.key.dtype, jax.dtypes.prng_key)

    @jax.jit
    def corrupt(state: Rng) -> Rng:
        with copy_and_mutate(state) as copy:
            copy.key = jax.random.key_data(state.key)
        return copy

    with pytest.raises(MutationValidationError, match=r"field 'key' of Rng"):
        corrupt(state)


class TestEveryContainerIsCheckedWhenTheBlockEnds:
    """Whatever created a container the copy holds at the end (the copy, or an assignment),
    and whatever its type (dict subclasses, namedtuples, registered nodes), its final state
    is compared with the original (issue 26 items 3, 4)."""

    def test_a_list_assigned_in_the_block_then_appended_to(self) -> None:
        with (
            pytest.raises(MutationValidationError, match=r"at key path \.blocks: list of 3 → 4"),
            copy_and_mutate(model()) as copy,
        ):
            copy.blocks = [copy.blocks[0], copy.blocks[1], copy.blocks[2]]  # validated
            copy.blocks.append(copy.blocks[0])  # ...then changed: refused like the other

    def test_a_dict_assigned_in_the_block_then_given_a_bad_item(self) -> None:
        with (
            pytest.raises(MutationValidationError, match=r"shape at key path \.blocks\[1\]"),
            copy_and_mutate(model()) as copy,
        ):
            copy.blocks[1].params = {"scale": jnp.ones(()), "bias": [jnp.zeros(2)]}
            copy.blocks[1].params["scale"] = jnp.ones(3)

    @pytest.mark.parametrize(
        "make",
        [
            collections.OrderedDict,
            lambda items: collections.defaultdict(list, items),
        ],
        ids=["OrderedDict", "defaultdict"],
    )
    def test_dict_subclasses(self, make: Callable[[dict[str, Any]], Any]) -> None:
        tree = Node(make({"a": jnp.zeros(2)}))
        with (
            pytest.raises(MutationValidationError, match=r"at key path \.value"),
            copy_and_mutate(tree) as copy,
        ):
            copy.value["b"] = jnp.zeros(2)  # a new key
        with (
            pytest.raises(MutationValidationError, match=r"shape at key path \.value\['a'\]"),
            copy_and_mutate(tree) as copy,
        ):
            copy.value["a"] = jnp.zeros(3)  # a new shape
        with copy_and_mutate(tree) as copy:
            copy.value["a"] = jnp.ones(2)
        assert type(copy.value) is type(tree.value) and copy.value["a"].tolist() == [1.0, 1.0]

    def test_namedtuples_and_registered_nodes_holding_lists(self) -> None:
        tree = Node(Pair([jnp.zeros(2)], Wrapper([jnp.zeros(1)], "w")))
        with (
            pytest.raises(MutationValidationError, match=r"\.value\.first: list of 1 → 2"),
            copy_and_mutate(tree) as copy,
        ):
            copy.value.first.append(jnp.zeros(2))
        with (
            pytest.raises(MutationValidationError, match=r"dtype at key path \.value\.second"),
            copy_and_mutate(tree) as copy,
        ):
            copy.value.second.child[0] = jnp.zeros(1, jnp.int32)


def test_a_cycle_through_a_list_item_is_the_documented_error_and_leaves_python_working() -> None:
    """Issue 26 item 6: `ValueError` naming the key path, before anything recurses."""
    with (
        pytest.raises(ValueError, match=r"cycle.*\.blocks\[0\]\.params\['bias'\]\[0\]"),
        copy_and_mutate(model()) as copy,
    ):
        copy.blocks[0].params["bias"][0] = copy

    def deep(n: int) -> int:
        return 0 if n == 0 else 1 + deep(n - 1)

    assert deep(900) == 900  # The interpreter's recursion limit is intact.
