"""`replace` returns the class; `asdict`, `astuple`, `fields`, `is_dataclass` are usable."""

import dataclasses
from typing import Any, assert_type

import jax
from _arrays import ones, zeros

import jax_dataclasses as jdc


@jdc.pytree_dataclass
class Params:
    weight: jax.Array
    steps: jdc.Static[int] = 1


params = Params(ones(2))
assert_type(jdc.replace(params, weight=zeros(2)), Params)
assert_type(jdc.replace(params, steps=2), Params)
assert_type(jdc.asdict(params), dict[str, Any])
assert_type(jdc.astuple(params), tuple[Any, ...])
assert_type(jdc.fields(params), tuple[dataclasses.Field[Any], ...])
assert_type(jdc.fields(Params), tuple[dataclasses.Field[Any], ...])
names = [f.name for f in jdc.fields(Params)]
assert_type(names, list[str])
assert_type(jdc.is_dataclass(params), bool)


def rejected() -> None:
    """Never called. mypy checks `replace`'s keywords against the fields; pyright does not."""
    jdc.replace(params, missing=1)  # E: mypy[call-arg]
    jdc.replace(params, steps="two")  # E: mypy[arg-type]
    jdc.replace(1, steps=2)  # E: mypy[type-var] pyright[reportArgumentType]
    jdc.asdict(Params)  # E: mypy[call-overload] pyright[reportArgumentType]
