"""Threads at once: decorating, flattening, rebuilding, `copy_and_mutate` and a shared `jdc.jit`
function, with the interpreter switching threads as often as it can. Free-threaded Python
(3.14t) runs them truly in parallel; here the short switch interval interleaves them at nearly
every bytecode, which finds a check-and-set that is not atomic just as well."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import jax_dataclasses as jdc

THREADS = 8
ROUNDS = 20


@pytest.fixture
def switch_often() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def run_in_threads(work: Callable[[int], None]) -> None:
    """`work(i)` in THREADS threads started together; re-raises the first failure."""
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def target(index: int) -> None:
        start.wait()
        try:
            work(index)
        except BaseException as error:  # Reported below, with the thread's traceback.
            errors.append(error)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def pending_class(name: str, array_field: str, *more: str) -> Any:
    """A new pytree dataclass `name` with an array field, `more` fields, and a field annotated
    with a class defined after it (so the class settles that name at first use)."""
    namespace: dict[str, object] = {"jdc": jdc, "jax": jax}
    lines = [f"    {array_field}: jax.Array", *(f"    {line}" for line in more)]
    body = "\n".join(["@jdc.pytree_dataclass", f"class {name}:", *lines])
    exec(body + "\n    later: 'Later' = None\nclass Later: pass\n", namespace)
    return namespace[name]


@jdc.pytree_dataclass
class Shared:
    w: jax.Array
    scale: jdc.Static[float] = 1.0


@jdc.jit
def apply(model: Shared, x: jax.Array, times: jdc.Static[int]) -> jax.Array:
    return model.w * x * model.scale * times


def test_threads_decorate_flatten_rebuild_mutate_and_call_jit_alike(switch_often: None) -> None:
    shared = Shared(jnp.arange(3.0), 2.0)

    def work(index: int) -> None:
        for step in range(ROUNDS):
            # Decorating: each thread its own classes, one with a name defined after it.
            local_cls = pending_class("Local", "x", "tag: jdc.Static[int] = 0")
            local = local_cls(jnp.full(2, index), tag=step)
            leaves, treedef = jax.tree.flatten(local)
            assert [leaf.tolist() for leaf in leaves] == [[index, index]]
            rebuilt = jax.tree.unflatten(treedef, [leaf + 1 for leaf in leaves])
            assert rebuilt.x.tolist() == [index + 1, index + 1] and rebuilt.tag == step

            # copy_and_mutate on a thread's own instance and on the shared one.
            with jdc.copy_and_mutate(local) as edited:
                edited.x = jnp.full(2, index * 10)
            assert edited.x.tolist() == [index * 10] * 2 and local.x.tolist() == [index] * 2
            with jdc.copy_and_mutate(shared) as mine:
                mine.w = shared.w + index
            assert mine.w.tolist() == [index, index + 1.0, index + 2.0]
            assert shared.w.tolist() == [0.0, 1.0, 2.0]

            # A shared jit function: the same compiled code for the same static values.
            times = step % 3 + 1
            assert apply(mine, jnp.ones(3), times).tolist() == [
                (index + k) * 2.0 * times for k in range(3)
            ]

    run_in_threads(work)
    # Three values of `times`, one model structure: three compilations, whichever thread.
    assert apply._cache_size() == 3  # type: ignore[attr-defined]


def test_threads_settle_a_shared_class_once(switch_often: None) -> None:
    """A class whose annotation names something defined after it is settled by whichever
    thread constructs or flattens it first; the others see the settled class."""
    for _ in range(ROUNDS):
        node_cls = pending_class("Node", "value")

        def work(index: int, node_cls: Any = node_cls) -> None:
            node = node_cls(jnp.full(1, index))
            assert [leaf.tolist() for leaf in jax.tree.leaves(node)] == [[index]]

        run_in_threads(work)
