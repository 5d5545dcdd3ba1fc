"""The declarations' long error messages, apart from the reader that raises them.

Each is a template filled with `.format(...)`: `{where}` names the field and its class (`field
'x' of Model`) or a function's parameter, `{shown}` the annotation as written. Each says what
is wrong and what to write instead; the comment above it shows the fix worked through (as
equinox keeps its messages). The tests match their text, so a change here is one users see.
"""

from __future__ import annotations

# Fix: `step: Static[Frozen[int]]` becomes `step: Static[int]` (or `Frozen[int]`).
STATIC_AND_FROZEN = (
    "{where} is static and frozen: a static value is part of the tree structure, never a "
    "traced leaf, so it is never trained and there is nothing to freeze. Drop Frozen[...] to "
    "keep it static, or drop Static[...] (or the static field metadata) to make it a frozen "
    "child."
)

# Fix: `n: Static[Sharded[int, "batch"]]` becomes `n: Static[int]`.
STATIC_AND_SHARDED = (
    "{where} is static and declares sharding axes {axes!r}: a static value is part of the "
    "tree structure, not an array on devices. Drop Static[...] to make it a sharded child, "
    "or drop Sharded[...] to keep it static."
)

# Fix: `w: Sharded[jax.Array, BATCH]` with `BATCH = "batch"` defined before the first use.
UNREAD_AXES = (
    "cannot read the sharding axes of {where}: {source} in its annotation is still not "
    "defined ({error}) at the class's first use. Define it before then, or write the axis "
    "names as strings."
)

# Fix: `x: "list[int"` becomes `x: "list[int]"`.
NOT_PYTHON = (
    "the annotation {source!r} of {where} is not valid Python ({error}); a string annotation "
    "is read as the expression it spells, as typing.get_type_hints reads it. Correct it, or "
    "write it without quotes."
)

# Fix: `type S = Static[Later]` moved below `class Later`, or `n: Static[Later]`.
UNEVALUATED_ALIAS = (
    "cannot tell whether the annotation of {where} is Static: it is a type alias whose value "
    "names something not defined yet where the class or function is created. Define the "
    "alias after the names it uses, or write the annotation out (Static[...] around the "
    "whole type if it is static)."
)

# Fix: decorate the class inside the function that defines its names, or define them globally.
LOCALS_GONE = (
    "cannot tell whether the annotation {shown} of {where} is Static: its outermost name is "
    "not a global, and the function that defines it has returned, so its local names cannot "
    "be read. Decorate it inside that function, or define the name at module level."
)

# Fix: `w: Sharded[Sharded[jax.Array, "a"], "b"]` becomes `w: Sharded[jax.Array, "a", "b"]`.
SHARDED_TWICE = "{where} declares its sharding twice ({axes}): give one Sharded[T, ...] per field."

# Fix: `Optional[Sharded[jax.Array, 'batch']]` becomes `Sharded[Optional[jax.Array], 'batch']`.
SHARDED_INSIDE = (
    "Sharded must be the outermost part of the annotation of {where}, got {shown}. Write "
    "Sharded[...] around the whole type, for example Sharded[Optional[jax.Array], 'batch'] "
    "instead of Optional[Sharded[jax.Array, 'batch']]."
)

# Fix: `Optional[Frozen[jax.Array]]` becomes `Frozen[Optional[jax.Array]]`.
FROZEN_INSIDE = (
    "Frozen must be the outermost part of the annotation of {where}, got {shown}. Write "
    "Frozen[...] around the whole type, for example Frozen[Optional[jax.Array]] instead of "
    "Optional[Frozen[jax.Array]]: the field is frozen as a whole (every leaf under it)."
)

# Fix: `Optional[Static[int]]` becomes `Static[Optional[int]]`; the problem is one of the two
# below, with the outermost name (` Later`) when one is undefined.
STATIC_INSIDE = (
    "{problem}. Write Static[...] around the whole type, for example Static[Optional[int]] "
    "instead of Optional[Static[int]]."
)
STATIC_UNDECIDED = (
    "cannot tell whether the annotation {shown} of {where} is Static: its outermost "
    "name{undefined} is not defined yet where the class or function is created"
)
STATIC_NOT_OUTERMOST = "Static must be the outermost part of the annotation of {where}, got {shown}"
