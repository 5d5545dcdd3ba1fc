"""The core's long error and warning messages, apart from the logic that raises them.

Each is a template filled with `.format(...)`: `{cls}` is the class's `__qualname__`, `{name}`
its `__name__`, `{field}` a field's name. Each says what is wrong and what to write instead;
the comment above it shows the fix worked through (as equinox keeps its messages). The tests
match their text, so a change here is a change users see.
"""

from __future__ import annotations

# -- decorating a class (`_core.builder`) ----------------------------------------------------

# Fix: `@jdc.pytree_dataclass` above `class Model:`, not `pytree_dataclass(Model())`.
NOT_A_CLASS = (
    "pytree_dataclass decorates classes, got {target!r}. Write @pytree_dataclass (or "
    "@pytree_dataclass(...)) directly above a class statement."
)

# Fix: delete `def __setattr__`; to edit a copy, `with jdc.copy_and_mutate(m) as m: m.x = 1`.
OWNS_SETATTR = (
    "{cls} defines {method}, which pytree_dataclass must own to keep instances frozen. "
    "Remove it; use jdc.copy_and_mutate to edit copies."
)

# Fix: `w: jax.Array = eqx.field(converter=jnp.asarray)` becomes `w: jax.Array` and
# `def __post_init__(self): self.w = jnp.asarray(self.w)`.
CONVERTER = (
    "field {field!r} of {cls} has a converter (equinox's field(converter=...)), which "
    "pytree_dataclass does not run: the value would be stored unconverted. Remove it and "
    "convert in __init__ or __post_init__ (self.{field} = jnp.asarray(self.{field}))."
)

# Fix: `class Sub(Base, slots=True):` becomes `@jdc.pytree_dataclass(slots=True)` above it.
SLOTS_KEYWORD = (
    "{cls}: the class keyword {keyword}=True cannot apply to a class built as it is created "
    "(slots need a new class). Decorate it instead: @jdc.pytree_dataclass({keyword}=True) "
    "above `class {name}`."
)

# Fix: `class Base(Root, kw_only=True):`, then `class Sub(Base):` builds.
FAILED_BASE = (
    "{cls} subclasses {base}, which could not be made a pytree dataclass when it was "
    "created ({failed}). Decorate {base} with the options it needs (kw_only=True), or give "
    "them as class keywords (class {base_name}(..., kw_only=True))."
)

# Fix: as for FAILED_BASE, on the class itself.
FAILED_AT_CREATION = (
    "{cls} could not be made a pytree dataclass when it was created: {error}. Decorate it "
    "with @jdc.pytree_dataclass(...) and the options it needs, or give them as class "
    "keywords (class Sub(Base, kw_only=True))."
)

# Fix: drop `jax.tree_util.register_dataclass(Model, ...)`; the decorator registers Model.
REGISTERED_ELSEWHERE = (
    "{cls} is already registered with JAX as a pytree node, by something other than "
    "pytree_dataclass (jax.tree_util.register_dataclass, register_pytree_node or another "
    "library's decorator or base class). Remove that registration: pytree_dataclass "
    "registers the class itself."
)

# -- constructing (`_core.construct`) ---------------------------------------------------------

# Fix: `scale: InitVar[float] = field(init=False)` becomes `scale: InitVar[float]`.
INITVAR_INIT_FALSE = (
    "InitVar {field!r} of {cls} has init=False, but an InitVar is only an __init__ "
    "parameter. Remove init=False (a field(init=False) inherited as the class attribute of "
    "that name counts too), or make it a field."
)

# Fix: `n: int = jdc.field(init=False, default=0)`, or `self.n = 0` in `__post_init__`.
UNSET_INIT_FALSE = (
    "field {field!r} of {cls} has init=False and no default, and no __post_init__ sets it: "
    "every field is part of the pytree. Give it a default, or set it in __post_init__ "
    "(self.{field} = value)."
)

# Fix: `self.b = b` in the class's own `__init__`, or `b: int = 0`.
INIT_DID_NOT_SET = (
    "{cls}.__init__ did not set field {field!r}. Every field is part of the pytree: give it "
    "a default, or set it in __init__ or __post_init__."
)

# Fix: `inv_mass: float = jdc.field(init=False)` set from `mass` becomes
# `@property def inv_mass(self): return 1 / self.mass`.
DERIVED_FIELD = (
    "field {field!r} of {cls} has init=False and __post_init__ sets it: {what}. "
    "(jax_dataclasses 1.6 left init=False fields out of the tree and ran __post_init__ "
    "again.) If it is derived from other fields, make it a @property or compute it where it "
    'is used; if it is state, silence this: warnings.filterwarnings("ignore", "field '
    '{field!r} of {cls}", jdc.DerivedFieldWarning).'
)
DERIVED_STATIC = (
    "it is static (part of the tree structure), and JAX rebuilds objects without running "
    "__post_init__, so when the fields it is computed from change (jax.tree.map, an "
    "optimizer update, copy_and_mutate) it keeps its old value"
)
DERIVED_CHILD = (
    "it is a leaf of the pytree, and JAX rebuilds objects without running __post_init__, "
    "so jax.grad does not reach the fields it is computed from, and after jax.tree.map (an "
    "optimizer update) it keeps its old value"
)

# -- subclasses (`_core.construct`) -----------------------------------------------------------

# Fix: `@dataclasses.dataclass` above `class Sub(Base):` becomes `@jdc.pytree_dataclass`.
OTHER_DECORATOR = (
    "{cls} subclasses the pytree dataclass {base} and is decorated with {decorator}, which "
    "does not make a subclass of a pytree dataclass one: its fields {fields} would not be "
    "part of the pytree. Decorate it with @jdc.pytree_dataclass instead (it takes the same "
    "arguments, and flax's field(pytree_node=False) marks a static field there too)."
)

# Fix: `@jdc.pytree_dataclass` above `class Sub(Base): extra: int`.
UNDECORATED_NEW_FIELDS = (
    "{cls} subclasses a pytree dataclass and declares fields {fields} but is not decorated. "
    "Add @jdc.pytree_dataclass above `class {name}` so the new fields become part of the "
    "pytree."
)

# Fix: `def __init_subclass__(cls, **kw): super().__init_subclass__(**kw)` in the base.
NEVER_REGISTERED = (
    "{cls} subclasses a pytree dataclass but was never registered as one, because a base "
    "class's __init_subclass__ does not call super().__init_subclass__(). Decorate it with "
    "@jdc.pytree_dataclass, or make that __init_subclass__ call super()."
)

# -- left over from a migration (`_core.construct.other_pytree_maker`; after the class name) --

# Fix: `class Model(eqx.Module):` becomes `@jdc.pytree_dataclass` above `class Model:`.
EQUINOX_BASE = (
    "subclasses equinox.Module, which makes every subclass a dataclass registered with JAX "
    "itself. Remove the eqx.Module base and keep @jdc.pytree_dataclass (see 'Migrating from "
    "equinox' in the docs)."
)
FLAX_BASE = (
    "subclasses flax.struct.PyTreeNode{through}, which makes every subclass a flax dataclass "
    "registered with JAX. Remove that base and keep @jdc.pytree_dataclass (for TrainState, "
    "see 'Migrating from flax.struct' in the docs)."
)
FLAX_DECORATOR = (
    "is already a flax dataclass registered with JAX: remove @flax.struct.dataclass and keep "
    "@jdc.pytree_dataclass (flax's field(pytree_node=False) still works)."
)
FROZEN_DATACLASS = (
    "is already a frozen dataclass: remove @dataclasses.dataclass(frozen=True) and keep "
    "@jdc.pytree_dataclass, which makes the dataclass (with the same options)."
)
