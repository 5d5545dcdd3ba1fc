"""Which leaves a training run updates: the fields classes declare `Frozen[T]`, and what one
run freezes or unfreezes besides (docs/design/features.md).

`trainable` gives a tree of bools with the structure of the tree it is given (a model, a list
of layers, an optax state whose moments are copies of the model, abstract or sharded trees):
True where a leaf is trained. `trainable_only` wraps an optax transformation so that it sees
the trained leaves only, the others getting a zero update and no state: the recipe that
cannot be misused (`optax.masked` with the mask passes the frozen leaves' gradients through
as their updates). `stop_frozen_gradients` stops the gradients of the frozen leaves.
Frozen fields stay children, so nothing here changes a tree's structure or its jit cache: the
classes' records say which fields are frozen (`layout_of(cls).declarations`), read as the tree
is walked.

A leaf's answer is the deepest decision on its key path: a field declared `Frozen` freezes
everything under it; a selector given for the run (a key path, or a class) freezes or
unfreezes the subtree where it matches, over a declaration at the same place; a freeze and an
unfreeze at the same place contradict each other (an error). So `freeze=[Model],
unfreeze=[".head"]` trains the head only, and a buffer declared `Frozen` inside the head stays
frozen unless a selector names it. A leaf that is no floating-point (or complex) number is
never trained, whatever is declared: an integer, boolean or key array (a step counter, optax's
`count`), whose gradient is `float0`, or any other object.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, NamedTuple, TypeAlias, TypeVar, cast

import jax

from jax_dataclasses._core.record import layout_of
from jax_dataclasses._tree_api import (
    KeyPath,
    is_node,
    keyed_level,
    keystr,
    path_text,
    tree_structure,
    type_of,
)

T = TypeVar("T")
Selector: TypeAlias = str | type
"""A key path in `jax.tree_util.keystr`'s form (`".layers[2]"`, `"['encoder'].w"`; `""` is
the root), or a class (every instance of it in the tree)."""


def trainable(
    tree: Any,
    *,
    freeze: Selector | Iterable[Selector] = (),
    unfreeze: Selector | Iterable[Selector] = (),
) -> Any:
    """A tree of bools with `tree`'s structure: True for each leaf to train, False for each
    frozen one.

    A leaf is frozen under a field declared `jdc.Frozen[...]`, or under what `freeze` selects
    for this run; `unfreeze` trains a subtree whatever it declares (a `Frozen` field deeper
    inside stays frozen unless selected too). The deepest decision on a leaf's key path wins.
    A leaf that is not a floating-point or complex number (an integer, boolean or key array,
    such as a step counter or optax's `count`) is never trained: False.

    To train with optax, wrap the optimizer: `jdc.trainable_only(tx)` takes the same
    selectors and gives frozen leaves no update and no state. Do not pass this mask to
    `optax.masked(tx, ...)` alone: `optax.masked` passes the updates it does not transform
    through unchanged, so every frozen leaf would move by its raw gradient. Map the mask to
    labels for `optax.multi_transform`, with `optax.set_to_zero()` for the frozen label, to
    build the same by hand (`lambda _: labels`, since a callable tree, as a model with a
    `__call__` is, would be called).

    Args:
        tree: Any pytree: a model, a list of layers, an optax state, an abstract tree.
        freeze: Key paths (`".layers[2]"`, as `jax.tree_util.keystr` writes them; `""` is the
            root) or classes (every instance of one) to freeze for this run.
        unfreeze: The same, to train for this run.

    Returns:
        A tree of bools with `tree`'s structure (None stays None).

    Raises:
        ValueError: a selector matches nothing in `tree` (the message lists the key paths
            closest to it), or a subtree is both frozen and unfrozen.
        TypeError: a selector is neither a key path nor a class.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Model:
        ...     embed: jdc.Frozen[jax.Array]
        ...     layers: list[jax.Array]
        >>> model = Model(jnp.ones((8, 2)), [jnp.ones((2, 2)), jnp.ones((2, 1))])
        >>> jdc.trainable(model)
        Model(embed=Frozen(False), layers=[True, True])
        >>> jdc.trainable(model, freeze=[Model], unfreeze=[".layers[1]"])
        Model(embed=Frozen(False), layers=[False, True])
    """
    walk = _Walk(_selectors(freeze, "freeze"), _selectors(unfreeze, "unfreeze"))
    flags: list[bool] = []
    walk.visit(tree, (), "", False, flags)
    walk.check_matched(tree)
    return tree_structure(tree, None).unflatten(flags)


def trainable_only(
    tx: Any,
    *,
    freeze: Selector | Iterable[Selector] = (),
    unfreeze: Selector | Iterable[Selector] = (),
) -> Any:
    """The optax transformation `tx` applied to the trainable leaves only: every frozen leaf
    gets an update of exactly zero, and `tx` keeps no state for it and never sees it (a
    `clip_by_global_norm` in `tx` clips by the trainable leaves' norm, weight decay reaches
    them only).

    Which leaves are trainable is `jdc.trainable(tree, freeze=..., unfreeze=...)`, taken of
    the parameters at `init` and of the updates at `update` (they have the same classes).
    This is `optax.multi_transform` with `tx` for the trainable leaves and
    `optax.set_to_zero()` for the others (an integer leaf's `float0` gradient, from
    `jax.grad(..., allow_int=True)`, gets a zero of the leaf's dtype, which
    `optax.apply_updates` can add). optax must be installed (typed `Any` here: optax
    ships no type information).

    Args:
        tx: Any optax `GradientTransformation`: a chain, a schedule inside it,
            `optax.MultiSteps(...).gradient_transformation()`, `optax.apply_if_finite(...)`
            (inside, these see the trainable leaves only; outside, every leaf).
        freeze: Key paths or classes to freeze for this run, as for `jdc.trainable`.
        unfreeze: The same, to train for this run.

    Returns:
        An optax `GradientTransformationExtraArgs`, to `init` with the model and `update` with
        its gradients.

    Raises:
        ValueError: at `init` and `update`, a selector that matches nothing, as
            `jdc.trainable` raises it.

    Examples:
        >>> import optax
        >>> @jdc.pytree_dataclass
        ... class Model:
        ...     embed: jdc.Frozen[jax.Array]
        ...     w: jax.Array
        >>> model = Model(jnp.ones(2), jnp.ones(2))
        >>> tx = jdc.trainable_only(optax.adamw(0.1, weight_decay=0.1))
        >>> grads = Model(jnp.ones(2), jnp.ones(2))
        >>> updates, _ = tx.update(grads, tx.init(model), model)
        >>> updates
        Model(embed=Frozen(f32[2](0.0, 0.0)), w=f32[2](-0.1099..., -0.1099...))
    """
    import optax  # type: ignore[import-untyped,unused-ignore]  # pyright: ignore[reportMissingTypeStubs]  # Optional: imported when used.

    def labels(tree: Any) -> Any:
        return jax.tree.map(_label, trainable(tree, freeze=freeze, unfreeze=unfreeze))

    def no_update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        """`optax.set_to_zero`, but a `float0` gradient (of an integer leaf, from
        `jax.grad(..., allow_int=True)`) gets a zero of the parameter's dtype, which
        `optax.apply_updates` can add."""
        like = updates if params is None else params
        return jax.tree.map(_zero_update, updates, like), state

    def no_state(params: Any) -> Any:
        return optax.EmptyState()

    frozen = optax.GradientTransformation(no_state, no_update)
    return optax.multi_transform({_TRAIN: tx, _FROZEN: frozen}, labels)


_TRAIN = "trainable"
_FROZEN = "frozen"
"""The labels `trainable_only` gives `optax.multi_transform` (its state is keyed by them)."""


def _label(train: bool) -> str:
    return _TRAIN if train else _FROZEN


def _zero_update(update: Any, param: Any) -> Any:
    float0 = getattr(update, "dtype", None) == jax.dtypes.float0
    return jax.lax.full_like(param if float0 else update, 0)


def stop_frozen_gradients(tree: T, mask: Any = None) -> T:
    """`tree` with `jax.lax.stop_gradient` applied to each frozen leaf: `jax.grad` of a function
    that calls this first gives exactly zero for them (and skips computing them).

    Args:
        tree: The tree a loss is differentiated with respect to.
        mask: `jdc.trainable(tree, ...)`'s result, for a run that freezes or unfreezes more
            than the classes declare; by default `jdc.trainable(tree)`.

    Returns:
        `tree`, its frozen leaves through `stop_gradient`.

    Raises:
        ValueError: `mask` does not have `tree`'s structure.

    Examples:
        >>> @jdc.pytree_dataclass
        ... class Model:
        ...     embed: jdc.Frozen[jax.Array]
        ...     w: jax.Array
        >>> loss = lambda m: jnp.sum(jdc.stop_frozen_gradients(m).embed * m.w)
        >>> jax.grad(loss)(Model(jnp.ones(2), jnp.ones(2)))
        Model(embed=Frozen(f32[2](0.0, 0.0)), w=f32[2](1.0, 1.0))
    """
    flags = trainable(tree) if mask is None else mask
    if tree_structure(flags, None) != tree_structure(tree, None):
        raise ValueError(
            "stop_frozen_gradients: the mask does not have the tree's structure (its tree: "
            f"{tree_structure(flags, None)}; the tree's: {tree_structure(tree, None)}). Make it "
            "from the same tree: jdc.trainable(tree, freeze=..., unfreeze=...)."
        )
    return cast(T, jax.tree.map(_stop_unless, flags, tree))


def _stop_unless(keep: bool, leaf: Any) -> Any:
    return leaf if keep or not _trainable_value(leaf) else jax.lax.stop_gradient(leaf)


def _trainable_value(leaf: object) -> bool:
    """Whether a leaf can be trained at all: an array (concrete, abstract or traced) or a
    Python number of a floating-point or complex dtype. Integers, booleans, keys (and
    `float0` gradients) have no gradient an optimizer could apply; other objects none."""
    dtype = getattr(leaf, "dtype", None)
    if dtype is None:
        return isinstance(leaf, float | complex)
    return bool(jax.numpy.issubdtype(dtype, jax.numpy.inexact))


class _Selectors(NamedTuple):
    """One of `freeze` and `unfreeze`: its key paths and classes, as given."""

    argument: str
    paths: frozenset[str]
    classes: tuple[type, ...]


def _selectors(given: Selector | Iterable[Selector], argument: str) -> _Selectors:
    items: list[object] = [given]
    if not isinstance(given, str | type) and isinstance(cast(object, given), Iterable):
        items = list(cast("Iterable[object]", given))
    for item in items:
        if not isinstance(item, str | type):
            raise TypeError(
                f"trainable({argument}=...) takes key paths (as jax.tree_util.keystr writes "
                f"them: '.layers[2]', \"['encoder']\") and classes, got {item!r}."
            )
    paths = frozenset(item for item in items if isinstance(item, str))
    return _Selectors(argument, paths, tuple(item for item in items if isinstance(item, type)))


class _Walk:
    """One `trainable` call: the selectors, which of them matched, every node's key path."""

    def __init__(self, freeze: _Selectors, unfreeze: _Selectors) -> None:
        self.freeze = freeze
        self.unfreeze = unfreeze
        self.named = bool(freeze.paths or unfreeze.paths)
        self.matched: set[tuple[str, object]] = set()
        self.seen: list[str] = []
        """Every node's and leaf's key path, when selectors name paths (for messages)."""

    def matches(self, selectors: _Selectors, node: object, text: str) -> list[object]:
        found: list[object] = [text] if text in selectors.paths else []
        found += [cls for cls in selectors.classes if isinstance(node, cls)]
        self.matched.update((selectors.argument, item) for item in found)
        return found

    def visit(
        self, node: object, path: KeyPath, text: str, frozen: bool, flags: list[bool]
    ) -> None:
        """Append the flags of `node`'s leaves; `frozen`: the deepest decision above it (each
        decision made lower down replaces it, a selector here after a declaration here)."""
        if self.named:
            self.seen.append(text)
        freezes = self.matches(self.freeze, node, text)
        unfreezes = self.matches(self.unfreeze, node, text)
        if freezes and unfreezes:
            raise ValueError(
                f"trainable: the subtree at key path {path_text(path)} is both "
                f"frozen (freeze={_show(freezes)}) and unfrozen (unfreeze={_show(unfreezes)}) "
                "for this run. Select it in one of them only."
            )
        if freezes or unfreezes:
            frozen = bool(freezes)
        if not is_node(node):
            flags.append(not frozen and _trainable_value(node))
            return
        layout = layout_of(type_of(node))
        declared = layout.frozen if layout is not None else ()
        children, _ = keyed_level(node)
        for (key, *_), child in children:
            below = frozen or getattr(key, "name", None) in declared
            child_text = text + keystr((key,)) if self.named else ""
            self.visit(child, (*path, key), child_text, below, flags)

    def check_matched(self, tree: object) -> None:
        unmatched: list[str] = []
        for selectors in (self.freeze, self.unfreeze):
            for item in sorted(
                selectors.paths - {p for a, p in self.matched if a == selectors.argument}
            ):
                close = difflib.get_close_matches(item, self.seen, n=5, cutoff=0.5)
                near = f" (key paths near it: {', '.join(map(repr, close))})" if close else ""
                unmatched.append(f"{selectors.argument}={item!r} is no key path in the tree{near}")
            for cls in selectors.classes:
                if (selectors.argument, cls) not in self.matched:
                    unmatched.append(
                        f"{selectors.argument}={cls.__qualname__} has no instance in the tree"
                    )
        if unmatched:
            raise ValueError(
                f"trainable: in the {type_of(tree).__qualname__} given, {'; '.join(unmatched)}. "
                "A selector that selects nothing would leave the run training what it meant to "
                "freeze (or the reverse): give key paths as jax.tree_util.keystr writes them "
                "('.layers[2].w', \"['encoder']\"; '' is the root), or classes in the tree."
            )


def _show(selected: list[object]) -> str:
    """Selectors as written: key paths quoted, classes by name."""
    return ", ".join(
        repr(s) if isinstance(s, str) else getattr(s, "__qualname__", repr(s)) for s in selected
    )
