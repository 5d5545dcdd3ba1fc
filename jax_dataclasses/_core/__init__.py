"""The core: how a pytree dataclass is built, constructed, frozen, flattened and printed.

Modules: `builder` (the one flow a class goes through: check, `dataclasses`, declare, compile
once, install once, register), `options` (the `dataclasses` options: one table, checked,
recorded), `codegen` (the one code generator), `construct` (the generated
`__init__`, adoption of subclasses), `record` (the class's layout and its JAX node), `frozen`
(the frozen `__setattr__`, 1.6's mutability marks), `defaults` (array defaults),
`static_values` (checks of static values, and their warnings), `printing` (how values print),
`messages` (the long error messages, apart from the code that raises them).
Entry function: `builder.pytree_dataclass`.

Dependency rule: the core uses `_field_declarations` and the utilities (`_tree_api`,
`_validate`), never a feature (docs/design.md, Folders).
"""
