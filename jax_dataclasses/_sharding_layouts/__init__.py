"""Sharding: where each array of a tree lives, from its fields' `Sharded` declarations.

Modules: `vocabulary` (axes, specs and the declarations of a class), `rules` (logical names
to mesh axes: a pure value), `trees` (the tree walk: specs, shardings, shapes, the rules of a
block), `checks` (checks and constraints of a tree's shardings). Entry functions:
`trees.partition_specs`, `checks.check_shardings`.

Dependency rule: a feature; it uses `_core`, `_field_declarations` and the utilities. The
folder is not named _sharding, the module it replaces, so that the old path stays a plain
alias (`_compat.moved`).
"""
