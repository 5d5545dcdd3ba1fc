"""The class options: `dataclasses.dataclass`'s keywords with its defaults (`OPTIONS`, the one
table: a new keyword is one row), checked when given (`checked_options`), what `dataclasses`
is asked to make for a pytree dataclass (`dataclass_options`), and what the class's
`__dataclass_params__` says after (`record_options`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

OPTIONS: Mapping[str, bool] = MappingProxyType(
    {
        # `dataclasses.dataclass`'s keywords and defaults (a test compares them on each Python).
        "init": True,
        "repr": True,
        "eq": True,
        "order": False,
        "unsafe_hash": False,
        "frozen": True,
        "match_args": True,
        "kw_only": False,
        "slots": False,
        "weakref_slot": False,
    }
)


def checked_options(options: Mapping[str, object]) -> dict[str, bool]:
    """`dataclasses.dataclass`'s options with its defaults, `options` among them; refused:
    another keyword, and `frozen=False`."""
    unknown = sorted(options.keys() - OPTIONS.keys())
    if unknown:
        raise TypeError(f"pytree_dataclass() got an unexpected keyword argument {unknown[0]!r}")
    checked = {**OPTIONS, **cast("Mapping[str, bool]", options)}
    if checked["frozen"] is not True:
        raise TypeError(
            "pytree_dataclass(frozen=False) is not supported: instances are always frozen, "
            "because JAX may share and cache them. Edit a copy with jdc.copy_and_mutate(obj) "
            "or jdc.replace(obj, ...)."
        )
    return checked


def dataclass_options(cls: type, options: dict[str, bool]) -> dict[str, bool]:
    """The arguments for `dataclasses.dataclass`, which makes what we do not (`eq`, `order`,
    the hash, slots, `match_args`): not our `__init__`, `__repr__`, `__setattr__` and
    `__delattr__`, so `init`, `repr` and `frozen` are what `record_options` records after."""
    explicit_hash = "__hash__" in cls.__dict__ and not (
        cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__
    )
    # Frozen to `dataclasses` where a base is a frozen dataclass (it refuses to mix frozen and
    # not); never where a base is a non-frozen one (likewise): our `__setattr__` freezes.
    bases = _frozen_bases(cls)
    frozen = bool(bases) and all(bases)
    # Hash like a frozen dataclass (by fields) unless the class brings its own.
    unsafe_hash = options["unsafe_hash"] or (options["eq"] and not explicit_hash)
    return dict(options, init=False, frozen=frozen, unsafe_hash=unsafe_hash, repr=False)


def record_options(cls: type, options: dict[str, bool]) -> None:
    """What `__dataclass_params__` says of the class: the options as given, frozen unless a
    base is a non-frozen dataclass (as `dataclasses` would have made it: a frozen plain
    dataclass may subclass it)."""
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.frozen = all(_frozen_bases(cls))
    params.init, params.repr = options["init"], options["repr"]
    params.unsafe_hash = options["unsafe_hash"]


def _frozen_bases(cls: type) -> list[bool]:
    """Whether each dataclass among the bases of `cls` is frozen."""
    return [
        base.__dataclass_params__.frozen  # type: ignore[attr-defined]
        for base in cls.__mro__[1:]
        if "__dataclass_fields__" in base.__dict__
    ]
