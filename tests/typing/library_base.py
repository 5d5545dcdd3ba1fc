"""A library's base class whose users' subclasses are pytree dataclasses (as equinox's and
flax.struct's are): `typing.dataclass_transform` on the base tells checkers so, and the class
keywords its `__init_subclass__` declares are dataclass options. Its `field_specifiers` name
`jdc.field` and the library's own `field` (which takes equinox's `static=`), so that checkers
see `init=False` and defaults given through either (with a bare `@dataclass_transform()` both
accept `Counter(..., n=1)`, which fails at run time). Not frozen to checkers, as no pytree
dataclass is (`frozen_default=True` would make every explicit decorator below need
`frozen=True`)."""

import abc
from typing import Any, assert_type

import jax
from _arrays import ones
from typing_extensions import dataclass_transform

import jax_dataclasses as jdc


def field(*, static: bool = False, **kwargs: Any) -> Any:
    """The library's `field` (as in docs/migrating/from-equinox.md): `jdc.field`'s arguments,
    and `static=True` as in equinox."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    if static:
        metadata["static"] = True
    return jdc.field(metadata=metadata, **kwargs)


@dataclass_transform(field_specifiers=(jdc.field, field))
@jdc.pytree_dataclass
class Kernel(abc.ABC):
    scale: jax.Array

    def __init_subclass__(cls, *, kw_only: bool = False, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)

    @abc.abstractmethod
    def evaluate(self, x: jax.Array) -> jax.Array: ...


class RBF(Kernel):  # A user's subclass: no decorator.
    lengthscale: jax.Array
    order: jdc.Static[int] = 2

    def evaluate(self, x: jax.Array) -> jax.Array:
        return self.scale * x / self.lengthscale


class Keyword(Kernel, kw_only=True):
    shift: jax.Array

    def evaluate(self, x: jax.Array) -> jax.Array:
        return x + self.shift


@jdc.pytree_dataclass(kw_only=True)
class Decorated(Kernel):
    shift: jax.Array

    def evaluate(self, x: jax.Array) -> jax.Array:
        return x - self.shift


class Counter(Kernel):
    n: int = jdc.field(init=False, default=0)
    steps: int = field(init=False, default=0)
    depth: int = field(static=True, default=2)

    def evaluate(self, x: jax.Array) -> jax.Array:
        return x * self.n


rbf = RBF(ones(1), ones(2))
assert_type(rbf.lengthscale, jax.Array)
assert_type(rbf.order, int)
assert_type(jdc.replace(rbf, order=3), RBF)
keyword = Keyword(ones(1), shift=ones(1))
decorated = Decorated(ones(1), shift=ones(1))
counter = Counter(ones(1), depth=3)
assert len(jax.tree.leaves(counter)) == 3  # scale, n, steps: depth is static


def mistakes() -> None:  # Checked, never run.
    RBF(ones(1))  # E: mypy[call-arg] pyright[reportCallIssue]
    Keyword(ones(1), ones(1))  # E: mypy[call-arg] pyright[reportCallIssue]
    Counter(ones(1), n=1)  # E: mypy[call-arg] pyright[reportCallIssue]
    Counter(ones(1), steps=1)  # E: mypy[call-arg] pyright[reportCallIssue]
