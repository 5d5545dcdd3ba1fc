"""Diagnostics: why `jit` compiled again.

Modules: `records` (what `jax.jit`'s caches key a call's arguments by, without the arrays),
`explain` (`jit_diff`: the difference of two records), `recompiles`
(`explain_recompiles`: reports made from the compilations JAX made). Entry functions:
`explain.jit_diff`, `recompiles.explain_recompiles`.

Dependency rule: a feature; it uses `_core`, `_field_declarations` and the utilities.
"""
