"""Why `jax.jit` compiled again: `jdc.jit_diff`, `jdc.explain_recompiles` and
`jdc.jit(explain_recompiles=...)`.

Each kind of change is checked twice: `jit_diff` names it, and a jitted function given the two
trees reports it, by key path from the argument's name, when (and because) JAX compiled again.
The sharding cases need 8 devices: `tests/transforms/_explain_child.py`, run in a child process.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.metadata
import logging
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import CONTEXT_NAMED, run_python

import jax_dataclasses as jdc

HERE = Path(__file__).resolve().parent


@jdc.pytree_dataclass
class Block:
    w: jax.Array
    n_heads: jdc.Static[int] = 8


@jdc.pytree_dataclass
class Conv:
    w: jax.Array


@jdc.pytree_dataclass
class KVCache:
    k: jax.Array


@jdc.pytree_dataclass
class Model:
    layers: list[Any]
    cache: KVCache | None = None


@jdc.pytree_dataclass
class Activation:
    x: jax.Array
    fn: jdc.Static[Any] = None


class Config:
    """A plain class: hashed and compared by identity."""

    def __init__(self, lr: float) -> None:
        self.lr = lr


class Custom:
    """Another library's node: a custom registration whose aux data is `meta`."""

    def __init__(self, a: Any, meta: Any) -> None:
        self.a, self.meta = a, meta


jax.tree_util.register_pytree_node(
    Custom, lambda c: ((c.a,), c.meta), lambda meta, children: Custom(children[0], meta)
)


def model(n_heads: tuple[int, ...] = (8, 8, 8), width: int = 3) -> Model:
    return Model([Block(jnp.ones(width), n) for n in n_heads])


def per_call(x: jax.Array) -> Activation:
    return Activation(x, lambda y: y)  # A new function on every call.


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the `StaticFieldWarning`s that constructing the bad static values emits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jdc.StaticFieldWarning)
        yield


# Each kind of change: (before, after, the line the report names, from the argument `tree`).
CHANGES: dict[str, tuple[Callable[[], Any], Callable[[], Any], str]] = {
    "static field": (
        model,
        lambda: model((8, 8, 4)),
        "tree.layers[2].n_heads: 8 → 4 (static field)",
    ),
    "list length": (
        model,
        lambda: model((8, 8, 8, 8)),
        "tree.layers: list of 3 items → list of 4 items (structure)",
    ),
    "None to a node": (
        model,
        lambda: Model(model().layers, KVCache(jnp.ones(2))),
        "tree.cache: None → KVCache (structure)",
    ),
    "dict keys": (
        lambda: {"a": jnp.ones(2), "b": jnp.ones(2)},
        lambda: {"a": jnp.ones(2), "c": jnp.ones(2)},
        "tree: dict with keys 'a', 'b' → dict with keys 'a', 'c' (structure)",
    ),
    "class": (
        lambda: Model([Block(jnp.ones(3))]),
        lambda: Model([Conv(jnp.ones(3))]),
        "tree.layers[0]: Block → Conv (class)",
    ),
    "shape": (model, lambda: model(width=4), "tree.layers[0].w: f32[3] → f32[4] (shape)"),
    "dtype": (
        lambda: {"w": jnp.ones(3)},
        lambda: {"w": jnp.ones(3, jnp.bfloat16)},
        "tree['w']: f32[3] → bf16[3] (dtype)",
    ),
    "weak type": (
        lambda: {"lr": 0.1},
        lambda: {"lr": jnp.float32(0.1)},
        "tree['lr']: Python float → f32[] (weak type); a Python number",
    ),
    "identity-hashed static": (
        lambda: Activation(jnp.ones(2), Config(0.1)),
        lambda: Activation(jnp.ones(2), Config(0.1)),
        "tree.fn: <Config object> → <Config object> (static field); its value of type Config "
        "hashes by identity",
    ),
    "per-call lambda": (
        lambda: per_call(jnp.ones(2)),
        lambda: per_call(jnp.ones(2)),
        "tree.fn: <function per_call.<locals>.<lambda>> → <function "
        "per_call.<locals>.<lambda>> (static field); a function made anew for each call",
    ),
    "NaN": (
        lambda: Activation(jnp.ones(2), float("nan")),
        lambda: Activation(jnp.ones(2), float("nan")),
        "tree.fn: nan → nan (static field); NaN is never equal to itself",
    ),
    "a static dict's item": (
        lambda: Activation(jnp.ones(2), {"lr": 0.1, "schedule": "cosine"}),
        lambda: Activation(jnp.ones(2), {"lr": 0.1, "schedule": "linear"}),
        "tree.fn['schedule']: 'cosine' → 'linear' (static field)",
    ),
    "another library's aux data": (
        lambda: [Custom(jnp.ones(2), ("relu", 1))],
        lambda: [Custom(jnp.ones(2), ("relu", 2))],
        "tree[0][1]: 1 → 2 (metadata)",
    ),
}


def recompile_reports(jitted: Any, *calls: tuple[Any, ...]) -> list[str]:
    """The messages of the `RecompileWarning`s that calling `jitted` with each argument tuple
    emits."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for arguments in calls:
            jax.block_until_ready(jitted(*arguments))
    return [str(w.message) for w in caught if w.category is jdc.RecompileWarning]


class TestEachKindOfChange:
    @pytest.mark.parametrize("kind", CHANGES)
    def test_jit_diff_names_it(self, kind: str) -> None:
        make_before, make_after, line = CHANGES[kind]
        with quiet():
            before, after = make_before(), make_after()
        path = line.removeprefix("tree")
        expected = "(the root)" + path if path.startswith(":") else path
        found = [str(change) for change in jdc.jit_diff(before, after)]
        assert any(text.startswith(expected) for text in found), found

    @pytest.mark.parametrize("kind", CHANGES)
    def test_the_report_names_it(self, kind: str) -> None:
        make_before, make_after, line = CHANGES[kind]

        def fn(tree: Any) -> Any:
            return jax.tree.map(lambda x: x * 2, tree)

        step = jdc.explain_recompiles(jax.jit(fn))
        with quiet():
            before, after = make_before(), make_after()
        (report,) = recompile_reports(step, (before,), (after,))
        assert report.startswith("jax.jit traced fn again (2 traces, 2 compilations); ")
        assert f"\n  {line}" in report, report


class TestJitDiff:
    def test_a_nested_static_field_by_key_path(self) -> None:
        (change,) = jdc.jit_diff({"model": model()}, {"model": model((8, 4, 8))})
        assert (change.path, change.kind, change.before, change.after, change.fix) == (
            "['model'].layers[1].n_heads",
            "static field",
            "8",
            "4",
            "",
        )

    def test_every_difference_in_key_path_order(self) -> None:
        before = model()
        after = Model([Block(jnp.ones(3, jnp.int32)), Block(jnp.ones(3), 2), Block(jnp.ones(5))])
        assert [str(change) for change in jdc.jit_diff(before, after)] == [
            ".layers[0].w: f32[3] → i32[3] (dtype)",
            ".layers[1].n_heads: 8 → 2 (static field)",
            ".layers[2].w: f32[3] → f32[5] (shape)",
        ]

    def test_a_dicts_kept_keys_are_compared_too(self) -> None:
        diff = jdc.jit_diff({"a": jnp.ones(2), "b": 1}, {"a": jnp.ones(3), "c": 1})
        assert [change.kind for change in diff] == ["structure", "shape"]
        assert diff[1].path == "['a']"

    def test_an_optax_state(self) -> None:
        optax = pytest.importorskip("optax")
        adam = optax.adam(1e-3)
        before = adam.init({"w": jnp.ones(3)})
        after = adam.init({"w": jnp.ones(4)})
        assert [str(change) for change in jdc.jit_diff(before, after)] == [
            "[0].mu['w']: f32[3] → f32[4] (shape)",
            "[0].nu['w']: f32[3] → f32[4] (shape)",
        ]

    def test_abstract_trees_from_eval_shape(self) -> None:
        before = jax.eval_shape(model)
        after = jax.eval_shape(lambda: model(width=2))
        assert [change.kind for change in jdc.jit_diff(before, after)] == ["shape"] * 3

    def test_no_difference(self) -> None:
        diff = jdc.jit_diff(model(), model())
        assert not diff and len(diff) == 0
        assert str(diff).startswith("no difference: same tree structure, static values")

    def test_new_array_values_are_no_difference(self) -> None:
        assert not jdc.jit_diff({"w": jnp.ones(3)}, {"w": jnp.zeros(3)})

    def test_64_bit_inputs_are_canonicalized_as_jit_does(self) -> None:
        assert not jdc.jit_diff(np.ones(3, np.float32), np.ones(3, np.float64))

    def test_a_python_numbers_value_only_when_nothing_else_differs(self) -> None:
        (change,) = jdc.jit_diff((2, jnp.ones(2)), (3, jnp.ones(2)))
        assert (change.path, change.kind, change.before, change.after) == ("[0]", "value", "2", "3")
        assert "unless it is a static argument" in change.fix
        assert [c.kind for c in jdc.jit_diff((2, jnp.ones(2)), (3, jnp.ones(3)))] == ["shape"]

    def test_a_class_defined_again(self) -> None:
        def define() -> type[Any]:
            @jdc.pytree_dataclass
            class Block:
                w: jax.Array

            return Block

        first, again = define(), define()
        (change,) = jdc.jit_diff([first(jnp.ones(2))], [again(jnp.ones(2))])
        assert (change.kind, change.before, change.after) == ("class", "Block", "Block")
        assert "the class was defined again" in change.fix

    def test_an_unhashable_static_value(self) -> None:
        with quiet():
            pair = Activation(jnp.ones(2), [1, 2]), Activation(jnp.ones(2), [1, 2, 3])
        (change,) = jdc.jit_diff(*pair)
        assert change.path == ".fn" and "of type list is not hashable" in change.fix
        assert "use an immutable value that compares by value" in change.fix

    def test_an_array_static_value(self) -> None:
        with quiet():
            pair = Activation(jnp.ones(2), np.ones(3)), Activation(jnp.ones(2), np.ones(3))
        (change,) = jdc.jit_diff(*pair)
        assert (change.before, change.after) == ("array f64[3]", "array f64[3]")
        assert change.fix.startswith("an array as a static value is compared with ==")

    def test_a_partial_made_per_call(self) -> None:
        pair = [Activation(jnp.ones(2), functools.partial(max, 1)) for _ in range(2)]
        (change,) = jdc.jit_diff(*pair)
        assert change.fix.startswith("functools.partial compares by identity")

    def test_a_named_tuples_field_by_name(self) -> None:
        optax = pytest.importorskip("optax")
        pair = [Activation(jnp.ones(2), optax.sgd(0.1)) for _ in range(2)]
        assert [change.path for change in jdc.jit_diff(*pair)] == [".fn.init", ".fn.update"]

    def test_another_librarys_aux_data_that_was_none(self) -> None:
        (change,) = jdc.jit_diff([Custom(jnp.ones(2), None)], [Custom(jnp.ones(2), "x")])
        assert str(change) == "[0]: None → 'x' (metadata)"

    def test_an_array_inside_a_static_tuple(self) -> None:
        before = Activation(jnp.ones(2), (np.ones(2), 1))
        after = Activation(jnp.ones(2), (np.ones(2), 1))
        (change,) = jdc.jit_diff(before, after)
        assert change.path == ".fn[0]" and change.kind == "static field"
        assert change.before == "array f64[2]" and "array as a static" in change.fix

    def test_a_different_but_plain_value_has_no_fix(self) -> None:
        (change,) = jdc.jit_diff(Activation(jnp.ones(2), "relu"), Activation(jnp.ones(2), "gelu"))
        assert change.fix == "" and str(change) == ".fn: 'relu' → 'gelu' (static field)"

    def test_never_runs_init(self) -> None:
        @jdc.pytree_dataclass
        class Guarded:
            x: jax.Array
            tag: jdc.Static[str]

            def __post_init__(self) -> None:
                calls.append(self.tag)

        calls: list[str] = []
        pair = Guarded(jnp.ones(2), "a"), Guarded(jnp.ones(2), "b")
        assert [str(c) for c in jdc.jit_diff(*pair)] == [".tag: 'a' → 'b' (static field)"]
        assert calls == ["a", "b"]  # The two constructions, nothing more.


class TestReports:
    def test_the_first_compilation_and_cache_hits_are_silent(self) -> None:
        step = jdc.explain_recompiles(jax.jit(lambda x: x + 1))
        calls = [(jnp.ones(3),), (jnp.zeros(3),), (np.ones(3, np.float32),), (jnp.ones(3),)]
        assert recompile_reports(step, *calls) == []  # A NumPy array traces nothing new.
        assert (step.traces, step.compilations) == (1, 1)  # type: ignore[attr-defined]

    def test_counts_and_the_nearest_earlier_compilation(self) -> None:
        def scale(x: jax.Array) -> jax.Array:
            return x * 2

        step = jdc.explain_recompiles(jax.jit(scale))
        reports = recompile_reports(
            step, (jnp.ones(3),), (jnp.ones(4),), (jnp.ones(4, jnp.int32),), (jnp.ones(3),)
        )
        assert reports == [
            "jax.jit traced scale again (2 traces, 2 compilations); its arguments differ from "
            "the nearest earlier compilation (the 1st) in:\n  x: f32[3] → f32[4] (shape)",
            "jax.jit traced scale again (3 traces, 3 compilations); its arguments differ from "
            "the nearest earlier compilation (the 2nd) in:\n  x: f32[4] → i32[4] (dtype)",
        ]
        assert (step.traces, step.compilations) == (3, 3)  # type: ignore[attr-defined]

    def test_jdc_jit_names_a_static_argument(self) -> None:
        @jdc.jit(explain_recompiles="warn")
        def tile(x: jax.Array, times: jdc.Static[int]) -> jax.Array:
            return jnp.tile(x, times)

        (report,) = recompile_reports(tile, (jnp.ones(2), 2), (jnp.ones(2), 3))
        assert report.endswith("\n  times: 2 → 3 (static argument)")

    def test_a_change_of_value_is_nearer_than_one_of_structure(self) -> None:
        @jdc.jit(explain_recompiles="warn")
        def tile(x: jax.Array, times: jdc.Static[int]) -> jax.Array:
            return jnp.tile(x, times)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jdc.RecompileWarning)
            tile(jnp.ones(2), 3)
            tile(jnp.ones(2), times=3)  # The latest, and one difference away, of structure.
        (report,) = recompile_reports(tile, (jnp.ones(2), 2))
        assert report.endswith(
            "the nearest earlier compilation (the 1st) in:\n  times: 3 → 2 (static argument)"
        )

    def test_a_static_argument_of_a_plain_jit_as_a_value(self) -> None:
        tile = jdc.explain_recompiles(jax.jit(jnp.tile, static_argnums=1))
        (report,) = recompile_reports(tile, (jnp.ones(2), 2), (jnp.ones(2), 3))
        assert "\n  reps: 2 → 3 (value); a Python number is traced" in report

    def test_passing_by_keyword_instead_of_by_position(self) -> None:
        @jdc.jit(explain_recompiles="warn")
        def tile(x: jax.Array, times: jdc.Static[int]) -> jax.Array:
            return jnp.tile(x, times)

        assert recompile_reports(tile, (jnp.ones(2), 2)) == []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tile(jnp.ones(2), times=2)
        (warning,) = caught
        assert "\n  times: passed by position → passed by keyword (structure)" in str(
            warning.message
        )
        assert warning.filename == __file__  # The caller's line, not ours.

    def test_the_cause_outside_the_arguments(self) -> None:
        step = jdc.explain_recompiles(jax.jit(lambda x: x + 1))
        recompile_reports(step, (jnp.ones(3),))
        step.clear_cache()  # type: ignore[attr-defined]
        (report,) = recompile_reports(step, (jnp.ones(3),))
        assert "its arguments match an earlier compilation (the 1st)" in report
        assert "jax_explain_cache_misses" in report

    def test_logging(self, caplog: pytest.LogCaptureFixture) -> None:
        step = jdc.explain_recompiles(jax.jit(lambda x: x + 1), report="log")
        with caplog.at_level(logging.WARNING, logger="jax_dataclasses"):
            step(jnp.ones(3))
            step(jnp.ones(2))
        (entry,) = caplog.records
        assert entry.name == "jax_dataclasses" and entry.levelno == logging.WARNING
        assert entry.getMessage().endswith("\n  x: f32[3] → f32[2] (shape)")

    def test_methods_and_classmethods(self) -> None:
        @jdc.pytree_dataclass
        class Layer:
            w: jax.Array
            activation: jdc.Static[str] = "tanh"

            @jdc.jit(explain_recompiles="warn")
            def apply(self, x: jax.Array) -> jax.Array:
                return x @ self.w

            @jdc.jit(explain_recompiles="warn")
            @classmethod
            def create(cls, n: jdc.Static[int]) -> Layer:
                return cls(jnp.ones((n, n)))

        layer = Layer(jnp.ones((2, 2)))
        relu = Layer(jnp.ones((2, 2)), "relu")
        (report,) = recompile_reports(lambda lay: lay.apply(jnp.ones(2)), (layer,), (relu,))
        assert report.startswith("jax.jit traced Layer.apply again")
        assert report.endswith("\n  self.activation: 'tanh' → 'relu' (static field)")
        (report,) = recompile_reports(Layer.create, (2,), (3,))
        assert report.endswith("\n  n: 2 → 3 (static argument)")
        assert type(Layer.create(2)) is Layer

    def test_the_jitted_functions_attributes(self) -> None:
        def double(x: jax.Array) -> jax.Array:
            return 2 * x

        step: Any = jdc.explain_recompiles(jax.jit(double))
        assert step.__name__ == "double" and step.__wrapped__.__wrapped__ is double
        assert step.lower(jnp.ones(2)).compile()(jnp.ones(2)).shape == (2,)
        assert step.eval_shape(jnp.ones(5)).shape == (5,)
        assert step(jnp.ones(2)).tolist() == [2.0, 2.0] and step._cache_size() == 1
        assert repr(step).startswith("<explain_recompiles of <PjitFunction of <function")

    @staticmethod
    def kept_alive(step: Any, inside: bool) -> tuple[bool, bool]:
        """Whether an argument's array, and an identity-compared static value (`inside` a
        static tuple, with an array), outlive two calls of `step` (that compiled) and the
        clearing of JAX's caches."""
        w, config = jnp.ones(3), Config(0.1)
        array, static = weakref.ref(w), weakref.ref(config)
        value = (config, np.ones(1000)) if inside else config
        with quiet():
            recompile_reports(step, (Activation(w, value),), (Activation(jnp.ones(4)),))
        del w, config, value
        jax.clear_caches()  # JAX's own caches keep static values until then.
        gc.collect()
        return array() is not None, static() is not None

    @pytest.mark.parametrize("inside", [False, True], ids=["alone", "inside a tuple"])
    def test_keeps_no_array_or_static_value_alive(self, inside: bool) -> None:
        jax_keeps = self.kept_alive(jax.jit(lambda tree: tree), inside)  # 0.4.36 keeps statics.
        explained = jdc.explain_recompiles(jax.jit(lambda tree: tree))
        assert self.kept_alive(explained, inside) == jax_keeps
        assert jax_keeps[0] is False

    def test_a_large_tree_keeps_a_few_objects_per_node(self) -> None:
        """What a first call keeps beyond plain `jax.jit`'s, counted by the collector: seven
        objects per node of a leaf and a static field set off the full collections that made
        an explained first call on 10,000 leaves cost 1.38x a plain one (issue 38, item 5)."""
        tree = [Block(jnp.ones(2)) for _ in range(2000)]

        def kept(explained: bool) -> int:
            step: Any = jax.jit(lambda tree: tree[0].w)
            if explained:
                step = jdc.explain_recompiles(step)
            gc.collect()
            before = len(gc.get_objects())
            step(tree)
            gc.collect()
            return len(gc.get_objects()) - before

        assert kept(explained=True) - kept(explained=False) <= 3 * len(tree)

    def test_a_value_that_cannot_print(self) -> None:
        class Unprintable:
            def __eq__(self, other: object) -> bool:
                return False

            def __hash__(self) -> int:
                return 0

            def __repr__(self) -> str:
                raise RuntimeError("no repr")

        step = jdc.explain_recompiles(jax.jit(lambda a: a.x))
        calls = [(Activation(jnp.ones(1), Unprintable()),) for _ in range(2)]
        (report,) = recompile_reports(step, *calls)
        unprintable = "<TestReports.test_a_value_that_cannot_print.<locals>.Unprintable object>"
        assert report.splitlines()[1] == f"  a.fn: {unprintable} → {unprintable} (static field)"

    def test_a_report_that_fails_does_not_fail_the_call(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def broken(tree: object) -> None:
            raise RuntimeError("a bug in the report")

        step = jdc.explain_recompiles(jax.jit(lambda x: x + 1))
        step(jnp.ones(1))
        monkeypatch.setattr("jax_dataclasses._diagnostics.recompiles.record", broken)
        with pytest.warns(jdc.RecompileWarning) as caught:
            assert step(jnp.ones(2)).tolist() == [2.0, 2.0]
        assert str(caught[0].message) == (
            "explain_recompiles could not explain why <lambda> compiled again: RuntimeError: a "
            "bug in the report"
        )

    def test_a_training_loop_that_compiles_every_step(self) -> None:
        """The optimizer (a static field) is made anew for each step: its functions compare
        by identity, so every step compiles again, and nothing else says so."""
        optax = pytest.importorskip("optax")

        @jdc.pytree_dataclass
        class TrainState:
            params: dict[str, jax.Array]
            opt_state: Any
            tx: jdc.Static[Any]
            hparams: jdc.Static[Any]

        def new_state(params: dict[str, jax.Array], opt_state: Any) -> TrainState:
            hparams = {"lr": 0.1, "clip": lambda g: jnp.clip(g, -1, 1)}  # Made per call, too.
            return TrainState(params, opt_state, optax.sgd(hparams["lr"]), hparams)

        @jdc.jit(explain_recompiles="warn")
        def train_step(state: TrainState, batch: jax.Array) -> TrainState:
            loss = lambda p: jnp.mean((batch @ p["w"]) ** 2)  # noqa: E731
            grads = jax.tree.map(state.hparams["clip"], jax.grad(loss)(state.params))
            updates, opt_state = state.tx.update(grads, state.opt_state)
            return new_state(optax.apply_updates(state.params, updates), opt_state)

        params = {"w": jnp.ones((3, 1))}
        with quiet():  # Warns, once, that a dict is unhashable; not about the optimizer.
            state = new_state(params, optax.sgd(0.1).init(params))
        batch = jnp.ones((4, 3))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(4):
                state = train_step(new_state(state.params, state.opt_state), batch)
        reports = [str(w.message) for w in caught if w.category is jdc.RecompileWarning]
        assert len(reports) == 3 and train_step.traces == 4  # type: ignore[attr-defined]
        lines = reports[-1].splitlines()[1:]
        assert [line.split(":")[0].strip() for line in lines] == [
            "state.tx.init",
            "state.tx.update",
            "state.hparams['clip']",
        ]
        assert all("a function made anew for each call" in line for line in lines)


class TestMisuse:
    def test_a_function_that_is_not_jitted(self) -> None:
        def step(x: jax.Array) -> jax.Array:
            return x

        with pytest.raises(TypeError) as caught:
            jdc.explain_recompiles(step)
        assert str(caught.value) == (
            "explain_recompiles expects a function made by jax.jit or jdc.jit, got <function "
            "TestMisuse.test_a_function_that_is_not_jitted.<locals>.step>: write "
            "jdc.explain_recompiles(jax.jit(f)), or @jdc.jit(explain_recompiles='warn') above "
            "its def."
        )

    @pytest.mark.parametrize("report", ["print", True, None])
    def test_an_unknown_report(self, report: Any) -> None:
        def step(x: jax.Array) -> jax.Array:
            return x

        with pytest.raises(ValueError) as caught:
            jdc.explain_recompiles(jax.jit(step), report=report)
        assert str(caught.value) == (
            "explain_recompiles of step: report must be 'warn' (a jdc.RecompileWarning) or "
            f"'log' (a warning on the 'jax_dataclasses' logger), got {report!r}."
        )

    def test_an_unknown_report_on_jdc_jit(self) -> None:
        with pytest.raises(ValueError, match=r"explain_recompiles of .*step: report must be"):

            @jdc.jit(explain_recompiles="loud")  # type: ignore[typeddict-item]
            def step(x: jax.Array) -> jax.Array:
                return x

    def test_off_by_default_jdc_jit_returns_jaxs_own_object(self) -> None:
        @jdc.jit
        def step(x: jax.Array) -> jax.Array:
            return x

        assert type(step) is type(jax.jit(lambda x: x))
        assert type(jdc.jit(step.__wrapped__, explain_recompiles=None)) is type(step)

    def test_a_recompile_warning_can_be_an_error(self) -> None:
        step = jdc.explain_recompiles(jax.jit(lambda x: x))
        step(jnp.ones(1))
        with warnings.catch_warnings():
            warnings.simplefilter("error", jdc.RecompileWarning)
            with pytest.raises(jdc.RecompileWarning, match=r"x: f32\[1\] → f32\[2\] \(shape\)"):
                step(jnp.ones(2))


@pytest.mark.subprocess
def test_sharding_on_8_devices() -> None:
    """Shardings (`tests/transforms/_explain_child.py`), in a process with 8 CPU devices."""
    arguments = ["-m", "pytest", str(HERE / "_explain_child.py"), "-q", "-p", "no:cacheprovider"]
    run_python([*arguments, "-rfE", "--tb=short"], 8, cwd=HERE.parent)


class TestWhatTheReportCannotMiss:
    """Issue 38, items 1 to 4: a compilation made elsewhere first, a cause outside the
    arguments, another library's metadata, deep and wide trees, and JAX's own flag."""

    def test_a_compilation_made_elsewhere_first_is_compared_with(self) -> None:
        def scale(x: jax.Array) -> jax.Array:
            return x * 2

        jax.jit(scale)(jnp.ones(3))  # JAX's trace cache is the function's: `step` reuses it.
        step: Any = jdc.explain_recompiles(jax.jit(scale))
        (report,) = recompile_reports(step, (jnp.ones(3),), (jnp.ones(4),))
        assert report == (
            "jax.jit traced scale again (1 trace, 1 compilation); its arguments differ from the "
            "nearest earlier compilation (one this function reused, compiled before it was "
            "wrapped or by another jax.jit of the same function) in:\n  x: f32[3] → f32[4] "
            "(shape)"
        )
        assert (step.traces, step.compilations) == (1, 1)

    def test_a_static_argument_after_a_first_call_elsewhere(self) -> None:
        def tile(x: jax.Array, times: jdc.Static[int]) -> jax.Array:
            return jnp.tile(x, times)

        jdc.jit(tile)(jnp.ones(2), 2)
        explained = jdc.jit(tile, explain_recompiles="warn")
        (report,) = recompile_reports(explained, (jnp.ones(2), 2), (jnp.ones(2), 3))
        assert report.endswith("in:\n  times: 2 → 3 (static argument)"), report

    @pytest.mark.parametrize("made_by", ["jdc.jit", "jax.jit"])
    def test_a_context_manager_is_the_cause_not_a_traced_number(self, made_by: str) -> None:
        def step(x: jax.Array, lr: float) -> jax.Array:
            return x @ x * lr

        jitted: Any = (
            jdc.jit(step, explain_recompiles="warn")
            if made_by == "jdc.jit"
            else jdc.explain_recompiles(jax.jit(step))
        )
        recompile_reports(jitted, (jnp.ones(3), 0.1))
        with jax.default_matmul_precision("highest"):
            (report,) = recompile_reports(jitted, (jnp.ones(3), 0.05))
        assert "lr" not in report, report
        assert "so the cause is outside the arguments" in report
        option = "jax_default_matmul_precision" if CONTEXT_NAMED else "trace context ["
        assert f"\n  {option}" in report and ": None → 'highest' (context)" in report, report

    def test_a_traced_number_of_jdc_jit_is_never_a_cause(self) -> None:
        @jdc.jit(explain_recompiles="warn")
        def step(x: jax.Array, lr: float) -> jax.Array:
            return x * lr

        recompile_reports(step, (jnp.ones(3), 0.1))
        step.clear_cache()  # type: ignore[attr-defined]
        (report,) = recompile_reports(step, (jnp.ones(3), 0.05))
        assert "lr" not in report and "the cause is outside the arguments" in report

    def test_an_equinox_modules_metadata_by_element(self) -> None:
        eqx = pytest.importorskip("equinox")
        before, after = eqx.nn.LayerNorm(3, eps=1e-5), eqx.nn.LayerNorm(3, eps=1e-6)
        assert [str(change) for change in jdc.jit_diff(before, after)] == [
            "[2]: 1e-05 → 1e-06 (metadata)"
        ]
        step = jdc.explain_recompiles(jax.jit(lambda norm, x: norm(x)))
        (report,) = recompile_reports(step, (before, jnp.ones(3)), (after, jnp.ones(3)))
        assert report.endswith("in:\n  norm[2]: 1e-05 → 1e-06 (metadata)"), report

    def test_a_flax_nnx_modules_change_is_visible(self) -> None:
        nnx = pytest.importorskip("flax.nnx")
        flax_version = tuple(
            int(part) for part in importlib.metadata.version("flax").split(".")[:2]
        )
        if flax_version < (0, 11):
            pytest.skip("flax 0.10's nnx keeps a module's metadata as one static value")
        before, after = (nnx.LayerNorm(3, epsilon=e, rngs=nnx.Rngs(0)) for e in (1e-5, 1e-6))
        (change,) = jdc.jit_diff(before, after)
        assert (change.kind, change.before, change.after) == ("metadata", "1e-05", "1e-06")

    def test_a_long_value_is_shown_where_it_differs(self) -> None:
        before = Activation(jnp.ones(1), "x" * 100 + "relu")
        after = Activation(jnp.ones(1), "x" * 100 + "gelu")
        (change,) = jdc.jit_diff(before, after)
        assert change.before != change.after and change.before.endswith("relu'"), change

    def test_a_tree_900_levels_deep(self) -> None:
        def nested(width: int) -> Any:
            tree: Any = jnp.ones(width)
            for _ in range(900):
                tree = [tree]
            return tree

        (change,) = jdc.jit_diff(nested(2), nested(3))
        assert change.path == "[0]" * 900 and change.kind == "shape"
        step = jdc.explain_recompiles(jax.jit(lambda tree: tree))
        (report,) = recompile_reports(step, (nested(2),), (nested(3),))
        assert report.endswith(f"in:\n  tree{'[0]' * 900}: f32[2] → f32[3] (shape)")

    def test_many_differences_are_counted_past_the_first_twenty(self) -> None:
        step = jdc.explain_recompiles(jax.jit(lambda tree: tree))
        (report,) = recompile_reports(step, ([jnp.ones(2)] * 100,), ([jnp.ones(3)] * 100,))
        lines = report.splitlines()
        assert len(lines) == 22 and lines[20] == "  tree[19]: f32[2] → f32[3] (shape)"
        assert lines[21] == "  ... and 80 more (jdc.jit_diff lists them all)"

    def test_jaxs_own_explanation_names_the_callers_line(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        step = jdc.explain_recompiles(jax.jit(lambda x: x + 1))
        with jax.explain_cache_misses(True), caplog.at_level(logging.WARNING):  # type: ignore[attr-defined]
            recompile_reports(step, (jnp.ones(2),), (jnp.ones(3),))
        misses = [r.getMessage() for r in caplog.records if "CACHE MISS at" in r.getMessage()]
        assert misses and all(f"MISS at {__file__}:" in miss for miss in misses), misses
